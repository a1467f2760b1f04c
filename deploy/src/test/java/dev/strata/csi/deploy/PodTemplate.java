package dev.strata.csi.deploy;

import java.util.List;
import java.util.Map;
import java.util.Optional;

/** The pod template of a Deployment or DaemonSet. */
record PodTemplate(KubeObject owner, Map<String, Object> spec) {

    /** Our image's name in the manifests (the kustomization's images entry rewrites it). */
    static final String DRIVER_IMAGE = "strata-csi";

    List<Container> containers() {
        return Tree.maps(spec, "containers").stream().map(Container::new).toList();
    }

    String namespace() {
        return owner.namespace();
    }

    Map<String, Object> labels() {
        return Tree.map(owner.body(), "spec", "template", "metadata", "labels");
    }

    String serviceAccount() {
        String name = Tree.string(spec, "serviceAccountName");
        return name == null ? "default" : name;
    }

    Optional<Map<String, Object>> volume(String name) {
        return Tree.maps(spec, "volumes").stream().filter(volume -> name.equals(volume.get("name"))).findFirst();
    }

    /** The container running one of our servers. */
    Container driver() {
        return containers().stream().filter(container -> container.imageRepository().equals(DRIVER_IMAGE)).findFirst()
                .orElseThrow(() -> new AssertionError(owner.describe() + " runs no " + DRIVER_IMAGE + " container"));
    }

    List<Container> sidecars() {
        return containers().stream().filter(container -> !container.imageRepository().equals(DRIVER_IMAGE)).toList();
    }

    /**
     * Where {@code path} inside {@code container} really is: the volume mounted at its longest
     * matching mount path, and the rest of the path below it; empty if no volume holds it.
     */
    Optional<VolumePath> resolve(Container container, String path) {
        return container.mounts().stream()
                .filter(mount -> path.equals(mount.path()) || path.startsWith(mount.path() + "/"))
                .max((a, b) -> Integer.compare(a.path().length(), b.path().length()))
                .map(mount -> new VolumePath(mount.volume(), path.substring(mount.path().length()).replaceFirst("^/", "")));
    }

    /** A path below a volume of the pod: the same file whichever container names it. */
    record VolumePath(String volume, String relative) {}

    /** The host path of a file below a hostPath volume, if the volume is one. */
    Optional<String> hostPath(VolumePath path) {
        return volume(path.volume()).map(volume -> Tree.string(volume, "hostPath", "path"))
                .map(host -> path.relative().isEmpty() ? host : host + "/" + path.relative());
    }
}
