package dev.strata.csi.deploy;

import java.nio.file.Path;
import java.util.Map;

/** One YAML document of a manifest file, as parsed: a Kubernetes object, or the kustomization. */
record KubeObject(Path file, Map<String, Object> body) {

    String kind() {
        return Tree.string(body, "kind");
    }

    String name() {
        return Tree.string(body, "metadata", "name");
    }

    String namespace() {
        return Tree.string(body, "metadata", "namespace");
    }

    /** kind/name and the file it is in, for messages. */
    String describe() {
        return kind() + "/" + name() + " (" + file.getFileName() + ")";
    }
}
