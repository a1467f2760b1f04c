# One image with both programs, controller-server and node-server, and the tools node-server runs.
# Build the jars first, then the image (docs/install.md, "The image"):
#   mvn package -DskipTests
#   docker build --build-arg BASE_IMAGE=<a Debian- or Ubuntu-based image with a Java 21+ runtime> -t strata-csi:0.1.0 .
# The default base is the public Eclipse Temurin 21 JRE image (Ubuntu-based, not a slim image); CI
# builds its own base (hack/base-image.sh), as no registry is reachable there.
ARG BASE_IMAGE=eclipse-temurin:21-jre
FROM ${BASE_IMAGE}

# The JVM takes the encoding of file names from the locale: with none set it is ASCII, and every
# path with another character (a volume name, a pod's directory) is "not a valid path" to Java.
ENV LANG=C.UTF-8

# Loop devices, mount and findmnt (util-linux, mount), mkfs for each filesystem the driver makes,
# mount.nfs for the nfs backend, cryptsetup for encrypted local volumes, and the lvm2 tools (with
# thin_check, which activating a thin pool runs; thin_dump and thin_delta for snapshot metadata) for the LVM pool. Rarely changes, so it comes
# before the jars.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      util-linux mount e2fsprogs xfsprogs btrfs-progs nfs-common cryptsetup-bin lvm2 thin-provisioning-tools \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb

# Both jars name their dependencies in lib/ (their manifests' Class-Path); the two lists are the same.
COPY node-server/target/lib/ /opt/strata/lib/
COPY deploy/jvm.options /opt/strata/jvm.options
# jffi's and Netty's native libraries, unpacked from their jars at build (node-server/pom.xml) and
# named to the JVM by native.options: no start copies them out of the jars into /tmp, so a
# server runs on a read-only root without a /tmp volume.
COPY node-server/target/native/ /opt/strata/native/
RUN arch=$(uname -m) \
 && test -f "/opt/strata/native/jni/$arch-Linux/libjffi-1.2.so" \
 && printf -- '-Djava.library.path=/opt/strata/native/META-INF/native\n-Djffi.boot.library.path=/opt/strata/native/jni/%s-Linux\n' \
      "$arch" > /opt/strata/native.options
COPY controller-server/target/controller-server.jar /opt/strata/controller-server.jar
COPY node-server/target/node-server.jar /opt/strata/node-server.jar

# Each server's AOT cache (JDK 25+), trained on a start of both servers here, so that a server in
# the image is ready sooner (docs/benchmarks.md, "Footprint"); with an older Java there is none.
COPY deploy/image/ /opt/strata/bin/
RUN /opt/strata/bin/aot-train

# The manifests pass the jar as the first argument: java @jvm.options @native.options [-XX:AOTCache=...] -jar /opt/strata/<server>.jar flags...
ENTRYPOINT ["/opt/strata/bin/strata-server"]
CMD ["/opt/strata/controller-server.jar", "--help"]
