# One image with both programs: controller-server and node-server.
# Build the jars first (hack/demo.sh or `mvn package`), then:
#   docker build --build-arg BASE_IMAGE=<a Debian-based image with a Java 21+ runtime> -t strata-csi .
ARG BASE_IMAGE=eclipse-temurin:21-jre
FROM ${BASE_IMAGE}

COPY controller-server/target/lib/ /opt/strata/lib/
COPY controller-server/target/controller-server.jar node-server/target/node-server.jar /opt/strata/
COPY deploy/jvm.options /opt/strata/jvm.options

ENTRYPOINT ["java", "@/opt/strata/jvm.options", "-jar"]
CMD ["/opt/strata/controller-server.jar", "--help"]
