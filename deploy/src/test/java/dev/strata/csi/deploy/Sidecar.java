package dev.strata.csi.deploy;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * What each sidecar release we pin needs, read from its own source and deploy/kubernetes/rbac.yaml:
 * the flags it accepts, the flags our deployment must give it, its API permissions, and the
 * controller capability whose calls it makes (none for the node's sidecars).
 * Changing a pinned version means checking this table against the new release.
 */
record Sidecar(String image, String version, Set<String> knownFlags, Set<String> requiredFlags, List<Rule> rules,
        Optional<String> controllerCapability) {

    /** external-snapshotter's sidecar, whose release deploy/snapshot-controller follows. */
    static final String SNAPSHOTTER = "registry.k8s.io/sig-storage/csi-snapshotter";

    /** external-snapshot-metadata's sidecar, which serves backup tools (the SnapshotMetadata service). */
    static final String SNAPSHOT_METADATA = "registry.k8s.io/sig-storage/csi-snapshot-metadata";

    /** Flags every sidecar built on csi-lib-utils' standardflags takes, and klog's --v. */
    private static final Set<String> COMMON_FLAGS = Set.of("version", "kubeconfig", "csi-address", "leader-election",
            "leader-election-namespace", "leader-election-lease-duration", "leader-election-renew-deadline",
            "leader-election-retry-period", "leader-election-labels", "kube-api-qps", "kube-api-burst",
            "http-endpoint", "metrics-address", "metrics-path", "automaxprocs", "v");

    static final List<Sidecar> ALL = List.of(
            new Sidecar("registry.k8s.io/sig-storage/csi-provisioner", "v6.3.0",
                    union(COMMON_FLAGS, Set.of("master", "volume-name-prefix", "volume-name-uuid-length",
                            "retry-interval-start", "retry-interval-max", "snapshot-orphan-sweep-interval", "timeout",
                            "strict-topology", "immediate-topology", "extra-create-metadata", "enable-pprof",
                            "default-fstype", "kube-api-capacity-qps", "kube-api-capacity-burst", "enable-capacity",
                            "capacity-for-immediate-binding", "capacity-poll-interval", "capacity-ownerref-level",
                            "capacity-threads", "worker-threads", "cloning-protection-threads", "node-deployment",
                            "node-deployment-immediate-binding", "node-deployment-base-delay",
                            "node-deployment-max-delay", "controller-publish-readonly",
                            "prevent-volume-mode-conversion", "feature-gates")),
                    Set.of("csi-address", "leader-election", "extra-create-metadata", "enable-capacity",
                            "capacity-ownerref-level"),
                    rules(Map.of(
                            "/persistentvolumes", "get list watch create patch delete",
                            "/persistentvolumeclaims", "get list watch update",
                            "storage.k8s.io/storageclasses", "get list watch",
                            "/events", "list watch create update patch",
                            // A claim restored from a snapshot: the VolumeSnapshot (and its source-protection
                            // finalizer, which the orphan sweep lists and watches) and its content.
                            "snapshot.storage.k8s.io/volumesnapshots", "get list watch update",
                            "snapshot.storage.k8s.io/volumesnapshotcontents", "get list",
                            "storage.k8s.io/csinodes", "get list watch",
                            "/nodes", "get list watch",
                            "storage.k8s.io/volumeattachments", "get list watch",
                            // A claim with a VolumeAttributesClass: pkg/controller/controller.go gets the class
                            // (upstream's rbac.yaml of v6.3.0 lacks this rule).
                            "storage.k8s.io/volumeattributesclasses", "get"),
                            Map.of(
                            "coordination.k8s.io/leases", "get watch list delete update create",
                            "storage.k8s.io/csistoragecapacities", "get list watch create update patch delete",
                            "/pods", "get",
                            "apps/replicasets", "get")),
                    Optional.of("CREATE_DELETE_VOLUME")),
            new Sidecar("registry.k8s.io/sig-storage/csi-attacher", "v4.12.0",
                    union(COMMON_FLAGS, Set.of("resync", "timeout", "retry-interval-start", "retry-interval-max",
                            "max-entries", "default-fstype", "reconcile-sync", "max-grpc-log-length", "worker-threads")),
                    Set.of("csi-address", "leader-election"),
                    rules(Map.of(
                            "/persistentvolumes", "get list watch patch",
                            "storage.k8s.io/csinodes", "get list watch",
                            "storage.k8s.io/volumeattachments", "get list watch patch",
                            "storage.k8s.io/volumeattachments/status", "patch"),
                            Map.of("coordination.k8s.io/leases", "get watch list delete update create")),
                    Optional.of("PUBLISH_UNPUBLISH_VOLUME")),
            new Sidecar("registry.k8s.io/sig-storage/csi-resizer", "v2.2.1",
                    union(COMMON_FLAGS, Set.of("master", "resync-period", "workers", "extra-modify-metadata", "timeout",
                            "retry-interval-start", "retry-interval-max", "handle-volume-inuse-error", "feature-gates")),
                    Set.of("csi-address", "leader-election"),
                    rules(Map.of(
                            "/persistentvolumes", "get list watch patch",
                            "/persistentvolumeclaims", "get list watch",
                            "/pods", "get list watch",
                            "/persistentvolumeclaims/status", "patch",
                            "/events", "list watch create update patch",
                            "storage.k8s.io/volumeattributesclasses", "get list watch"),
                            Map.of("coordination.k8s.io/leases", "get watch list delete update create")),
                    Optional.of("EXPAND_VOLUME")),
            // --feature-gates is left out: its CSIVolumeGroupSnapshot would need the groupsnapshot.storage.k8s.io
            // rules, and the driver has no group snapshots.
            new Sidecar(SNAPSHOTTER, "v8.6.0",
                    union(COMMON_FLAGS, Set.of("resync-period", "snapshot-name-prefix", "snapshot-name-uuid-length",
                            "worker-threads", "timeout", "extra-create-metadata", "retry-interval-start",
                            "retry-interval-max", "node-deployment", "groupsnapshot-name-prefix",
                            "groupsnapshot-name-uuid-length", "feature-gates")),
                    Set.of("csi-address", "leader-election"),
                    rules(Map.of(
                            "/events", "list watch create update patch",
                            "snapshot.storage.k8s.io/volumesnapshotclasses", "get list watch",
                            "snapshot.storage.k8s.io/volumesnapshotcontents", "create get list watch update patch",
                            "snapshot.storage.k8s.io/volumesnapshotcontents/status", "update patch",
                            // With --feature-gates=CSIVolumeGroupSnapshot=true, as deploy/ runs it.
                            "groupsnapshot.storage.k8s.io/volumegroupsnapshotclasses", "get list watch",
                            "groupsnapshot.storage.k8s.io/volumegroupsnapshotcontents", "get list watch update patch",
                            "groupsnapshot.storage.k8s.io/volumegroupsnapshotcontents/status", "update patch"),
                            Map.of("coordination.k8s.io/leases", "get watch list delete update create")),
                    // Without it the release exits at start ("does not support ControllerCreateSnapshot").
                    Optional.of("CREATE_DELETE_SNAPSHOT")),
            // In its component (components/snapshot-metadata), not the base: pkg/sidecar/sidecar.go's flags, and
            // klog's --v; the API calls of pkg/internal (authn, authz, server/grpc: auth.go, snapshot.go,
            // snapshotter_secret.go). A Secret is read only for a VolumeSnapshotClass that names snapshotter
            // secrets, which this driver's do not. No leader election: every replica serves.
            new Sidecar(SNAPSHOT_METADATA, "v1.1.0",
                    Set.of("kubeconfig", "csi-address", "version", "timeout", "port", "tls-cert", "tls-key", "audience",
                            "max-streaming-duration-min", "kube-api-qps", "kube-api-burst", "http-endpoint", "metrics-path",
                            "disable-metrics", "v"),
                    Set.of("csi-address", "tls-cert", "tls-key"),
                    rules(Map.of(
                            "cbt.storage.k8s.io/snapshotmetadataservices", "get",
                            "authentication.k8s.io/tokenreviews", "create",
                            "authorization.k8s.io/subjectaccessreviews", "create",
                            "snapshot.storage.k8s.io/volumesnapshots", "get",
                            "snapshot.storage.k8s.io/volumesnapshotcontents", "get",
                            "snapshot.storage.k8s.io/volumesnapshotclasses", "get list"),
                            Map.of()),
                    Optional.empty()),
            new Sidecar("registry.k8s.io/sig-storage/csi-node-driver-registrar", "v2.17.0",
                    Set.of("connection-timeout", "timeout", "csi-address", "plugin-registration-path",
                            "kubelet-registration-path", "health-port", "http-endpoint", "version", "mode",
                            "enable-pprof", "v"),
                    Set.of("csi-address", "kubelet-registration-path"),
                    List.of(),
                    Optional.empty()),
            new Sidecar("registry.k8s.io/sig-storage/livenessprobe", "v2.19.0",
                    Set.of("probe-timeout", "csi-address", "health-port", "metrics-address", "http-endpoint",
                            "metrics-path", "version", "v"),
                    Set.of("csi-address"),
                    List.of(),
                    Optional.empty()));

    static Optional<Sidecar> of(Container container) {
        return ALL.stream().filter(sidecar -> sidecar.image().equals(container.imageRepository())).findFirst();
    }

    /** The table's entry for {@code image}. */
    static Sidecar named(String image) {
        return ALL.stream().filter(sidecar -> sidecar.image().equals(image)).findFirst().orElseThrow();
    }

    private static Set<String> union(Set<String> a, Set<String> b) {
        Set<String> all = new java.util.HashSet<>(a);
        all.addAll(b);
        return Set.copyOf(all);
    }

    /** Rules from "group/resource" -> "verb verb ...", cluster-wide and in the pod's own namespace. */
    private static List<Rule> rules(Map<String, String> cluster, Map<String, String> ownNamespace) {
        List<Rule> rules = new ArrayList<>();
        cluster.forEach((resource, verbs) -> add(rules, resource, verbs, false));
        ownNamespace.forEach((resource, verbs) -> add(rules, resource, verbs, true));
        return List.copyOf(rules);
    }

    private static void add(List<Rule> rules, String groupResource, String verbs, boolean inOwnNamespace) {
        int slash = groupResource.indexOf('/');
        String group = groupResource.substring(0, slash);
        String resource = groupResource.substring(slash + 1);
        for (String verb : verbs.split(" ")) {
            rules.add(new Rule(group, resource, verb, inOwnNamespace));
        }
    }
}
