package dev.strata.csi.deploy;

/**
 * One permission: a verb on a resource of an API group, either across the cluster or only in the
 * namespace the pod runs in (a Role there, or a ClusterRole bound by a RoleBinding there).
 */
record Rule(String group, String resource, String verb, boolean inOwnNamespace) {

    @Override
    public String toString() {
        return verb + " " + (group.isEmpty() ? "" : group + "/") + resource + (inOwnNamespace ? " (own namespace)" : " (cluster)");
    }
}
