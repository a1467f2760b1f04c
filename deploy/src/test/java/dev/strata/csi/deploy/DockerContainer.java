package dev.strata.csi.deploy;

import com.github.dockerjava.api.model.Bind;
import com.github.dockerjava.api.model.Capability;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * One container of a pod of deploy/, as Docker is to run it ({@link Kubelet} maps the manifest):
 * every field comes from the manifest, or from what kubelet adds to every pod (the apiserver's
 * environment, the automounted ServiceAccount volume).
 *
 * @param pod              the pod's name
 * @param name             the container's name
 * @param hostNetwork      on the node's network (--network host) rather than a network of its own
 * @param serviceNames     the DNS names of the Services that select the pod: they resolve to its address
 * @param resolvesServices whether the pod's DNS policy resolves Service names (ClusterFirst, or ClusterFirstWithHostNet on the host network)
 * @param entrypoint       the manifest's command (replaces the image's entrypoint); empty: the image's
 * @param args             the manifest's args, $(VAR) references expanded as kubelet expands them
 * @param env              the environment: the manifest's, downward-API values resolved, and kubelet's KUBERNETES_SERVICE_*
 * @param binds            the volumes, as bind mounts of directories on this machine
 * @param tmpfs            emptyDir volumes of medium Memory: mount path to options
 * @param user             runAsUser[:runAsGroup]; empty: the image's user
 * @param readOnlyRoot     readOnlyRootFilesystem
 * @param capAdd           capabilities added to Docker's default set
 * @param capDrop          capabilities dropped from it
 * @param securityOpts     Docker's --security-opt values (no-new-privileges; unconfined profiles for privileged)
 * @param deviceCgroupRules device access granted beyond Docker's default (all devices for privileged)
 * @param memoryBytes      resources.limits.memory
 * @param nanoCpus         resources.limits.cpu, in billionths of a CPU
 * @param readiness        the readinessProbe's HTTP GET, which the test waits for as kubelet does before the pod counts as ready
 */
public record DockerContainer(String pod, String name, boolean hostNetwork, List<String> serviceNames, boolean resolvesServices,
        List<String> entrypoint, List<String> args, Map<String, String> env, List<Bind> binds, Map<String, String> tmpfs,
        Optional<String> user, boolean readOnlyRoot, List<Capability> capAdd, List<Capability> capDrop, List<String> securityOpts,
        List<String> deviceCgroupRules, OptionalLong memoryBytes, OptionalLong nanoCpus, Optional<HttpGet> readiness) {

    /** A probe's HTTP GET: the container's port (a named port resolved) and path. */
    public record HttpGet(int port, String path) {}

    /** A flag's value in {@link #args()} ({@code --name=value}). */
    public Optional<String> flag(String name) {
        return Container.flags(args).stream().filter(arg -> arg.name().equals(name)).map(Container.Arg::value).findFirst();
    }

    /** Where {@code path} inside the container is on this machine: below the bind that holds it. */
    public Path onHost(String path) {
        Bind bind = binds.stream().filter(candidate -> below(path, candidate.getVolume().getPath()))
                .max(Comparator.comparingInt(candidate -> candidate.getVolume().getPath().length()))
                .orElseThrow(() -> new AssertionError(name + ": no volume holds " + path));
        return Path.of(bind.getPath()).resolve(relative(path, bind.getVolume().getPath()));
    }

    /** Where {@code path} on this machine is inside the container, if a bind holds it. */
    public Optional<String> inContainer(Path path) {
        String host = path.toString();
        return binds.stream().filter(candidate -> below(host, candidate.getPath()))
                .max(Comparator.comparingInt(candidate -> candidate.getPath().length()))
                .map(bind -> Path.of(bind.getVolume().getPath()).resolve(relative(host, bind.getPath())).toString());
    }

    private static boolean below(String path, String dir) {
        return path.equals(dir) || path.startsWith(dir.endsWith("/") ? dir : dir + "/");
    }

    private static String relative(String path, String dir) {
        return path.substring(dir.length()).replaceFirst("^/", "");
    }
}
