package dev.strata.csi.backend.nfs;

import csi.v1.Csi.CapacityRange;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.VolumeCapability;
import csi.v1.Csi.VolumeContentSource;
import dev.strata.csi.backend.CreateChecks;
import dev.strata.csi.rpc.CsiException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A CreateVolume request for an NFS volume, once checked: where the directory goes, what happens
 * to it on delete, its mode, the capacity to record, and the mount options the StorageClass gave.
 *
 * <p>StorageClass parameters: {@code server}, {@code share} (required), {@code subDir} (a template;
 * default: the volume name), {@code onDelete} (delete, retain, archive; default delete),
 * {@code mountPermissions} (octal mode of the directory). Keys the provisioner adds under
 * {@code csi.storage.k8s.io/} fill the template and are otherwise ignored; any other key is refused.
 */
record NfsRequest(String name, NfsVolume volume, OnDelete onDelete, Optional<Integer> mode, long capacityBytes,
        List<String> mountFlags, ContentSource source) {

    /**
     * What the volume is made from (volume_content_source): nothing, or a snapshot or a volume of
     * this backend on the same export. An id this backend never handed out is NOT_FOUND; one on
     * another export INVALID_ARGUMENT (a copy is made within an export).
     */
    record ContentSource(Optional<NfsSnapshotId> snapshot, Optional<NfsVolumeId> volume) {

        static final ContentSource NONE = new ContentSource(Optional.empty(), Optional.empty());

        boolean present() {
            return snapshot.isPresent() || volume.isPresent();
        }

        /** The source's id as the record keeps it: empty for none. */
        String snapshotId() {
            return snapshot.map(NfsSnapshotId::toString).orElse("");
        }

        String volumeId() {
            return volume.map(NfsVolumeId::toString).orElse("");
        }

        @Override
        public String toString() {
            return snapshot.map(id -> "snapshot " + id).or(() -> volume.map(id -> "volume " + id)).orElse("nothing");
        }
    }

    static final String MOUNT_PERMISSIONS = FileMode.PARAMETER;
    private static final Set<String> KEYS = Set.of(NfsVolume.SERVER, NfsVolume.SHARE, NfsVolume.SUB_DIR,
            OnDelete.PARAMETER, MOUNT_PERMISSIONS);
    private static final String PROVISIONER_PREFIX = "csi.storage.k8s.io/";
    private static final long MIB = 1L << 20;

    /** Template variables and the provisioner's parameters (--extra-create-metadata) that fill them. */
    private static final Map<String, String> VARIABLES = Map.of(
            "pvc.metadata.name", "csi.storage.k8s.io/pvc/name",
            "pvc.metadata.namespace", "csi.storage.k8s.io/pvc/namespace",
            "pv.metadata.name", "csi.storage.k8s.io/pv/name");
    private static final Pattern VARIABLE = Pattern.compile("\\$\\{([^}]*)}");

    /** Whether the StorageClass parameters ask for an NFS volume. */
    static boolean isNfs(Map<String, String> parameters) {
        return parameters.containsKey(NfsVolume.SERVER) || parameters.containsKey(NfsVolume.SHARE);
    }

    static NfsRequest of(CreateVolumeRequest request) {
        CreateChecks.name(request);
        new NfsCapabilities().require(request.getVolumeCapabilitiesList(), "volume_capabilities");
        Map<String, String> parameters = request.getParametersMap();
        for (String key : parameters.keySet()) {
            if (!KEYS.contains(key) && !key.startsWith(PROVISIONER_PREFIX)) {
                throw CsiException.invalidArgument("unknown StorageClass parameter '" + CsiException.printable(key)
                        + "' for an NFS volume; this driver takes: " + String.join(", ", KEYS.stream().sorted().toList()));
            }
        }
        String server = parameters.getOrDefault(NfsVolume.SERVER, "");
        String share = parameters.getOrDefault(NfsVolume.SHARE, "");
        if (server.isEmpty() || share.isEmpty()) {
            throw CsiException.invalidArgument("an NFS StorageClass needs both parameters '" + NfsVolume.SERVER + "' and '"
                    + NfsVolume.SHARE + "'");
        }
        String subDir = fill(parameters.getOrDefault(NfsVolume.SUB_DIR, request.getName()), parameters);
        NfsVolume volume = NfsVolume.fromContext(Map.of(NfsVolume.SERVER, server, NfsVolume.SHARE, share, NfsVolume.SUB_DIR, subDir))
                .orElseThrow();
        if (volume.subDir().isEmpty()) {
            throw CsiException.invalidArgument("subDir '" + CsiException.printable(subDir) + "' names the whole share; a volume needs a directory of its own");
        }
        OnDelete onDelete = OnDelete.of(parameters.getOrDefault(OnDelete.PARAMETER, OnDelete.DELETE.value()));
        List<String> mountFlags = new ArrayList<>();
        for (VolumeCapability capability : request.getVolumeCapabilitiesList()) {
            mountFlags.addAll(capability.getMount().getMountFlagsList());
        }
        return new NfsRequest(request.getName(), volume, onDelete, mode(parameters.get(MOUNT_PERMISSIONS)),
                capacity(request.getCapacityRange()), List.copyOf(mountFlags.stream().distinct().toList()), source(request, volume));
    }

    private static ContentSource source(CreateVolumeRequest request, NfsVolume volume) {
        if (!request.hasVolumeContentSource()) {
            return ContentSource.NONE;
        }
        VolumeContentSource source = request.getVolumeContentSource();
        if (source.hasSnapshot()) {
            String id = source.getSnapshot().getSnapshotId();
            if (id.isEmpty()) {
                throw CsiException.missing("volume_content_source.snapshot.snapshot_id");
            }
            NfsSnapshotId snapshot = NfsSnapshotId.parse(id).orElseThrow(() -> CsiException.notFound("snapshot "
                    + CsiException.printable(id) + " does not exist"));
            sameExport("snapshot " + id, snapshot.export(), volume);
            return new ContentSource(Optional.of(snapshot), Optional.empty());
        }
        String id = source.getVolume().getVolumeId();
        if (id.isEmpty()) {
            throw CsiException.missing("volume_content_source.volume.volume_id");
        }
        NfsVolumeId clone = NfsVolumeId.parse(id).orElseThrow(() -> CsiException.notFound("source volume "
                + CsiException.printable(id) + " does not exist"));
        sameExport("volume " + id, clone.volume().export(), volume);
        return new ContentSource(Optional.empty(), Optional.of(clone));
    }

    private static void sameExport(String what, NfsVolume export, NfsVolume volume) {
        if (!export.equals(volume.export())) {
            throw CsiException.invalidArgument("volume_content_source: " + what + " is on the export " + export.source()
                    + ", this StorageClass's is " + volume.export().source() + "; a volume is made from a source on its own export");
        }
    }

    /** Fills {@code ${...}} variables; one that is unknown or has no value is INVALID_ARGUMENT. */
    static String fill(String template, Map<String, String> parameters) {
        Matcher matcher = VARIABLE.matcher(template);
        StringBuilder out = new StringBuilder();
        while (matcher.find()) {
            String variable = matcher.group(1);
            String key = VARIABLES.get(variable);
            if (key == null) {
                throw CsiException.invalidArgument("subDir template variable ${" + CsiException.printable(variable)
                        + "} is unknown; known: " + VARIABLES.keySet().stream().sorted().map(v -> "${" + v + "}").toList());
            }
            String value = parameters.getOrDefault(key, "");
            if (value.isEmpty()) {
                throw CsiException.invalidArgument("subDir template variable ${" + variable + "} has no value: the provisioner "
                        + "did not pass " + key + " (run external-provisioner with --extra-create-metadata)");
            }
            matcher.appendReplacement(out, Matcher.quoteReplacement(value));
        }
        matcher.appendTail(out);
        if (out.indexOf("${") >= 0) {
            throw CsiException.invalidArgument("subDir template '" + CsiException.printable(template) + "' has an unclosed ${");
        }
        return out.toString();
    }

    private static Optional<Integer> mode(String value) {
        return value == null ? Optional.empty() : Optional.of(FileMode.parse(value));
    }

    /** The capacity recorded (and enforced where quotas are): required bytes rounded up to whole MiB; 0 is no limit. */
    private static long capacity(CapacityRange range) {
        CreateChecks.range(range);
        long required = range.getRequiredBytes();
        long limit = range.getLimitBytes();
        long size = Math.ceilDiv(required, MIB) * MIB;
        return limit > 0 && size > limit ? required : size;
    }
}
