package dev.strata.csi.controller.local;

import csi.v1.Csi.CapacityRange;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.TopologyRequirement;
import csi.v1.Csi.VolumeCapability;
import csi.v1.Csi.VolumeContentSource;
import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.agent.api.IoLimits;
import dev.strata.csi.backend.KubernetesKeys;
import dev.strata.csi.backend.local.LocalCapabilities;
import dev.strata.csi.backend.local.LocalParameters;
import dev.strata.csi.controller.backend.CreateChecks;
import dev.strata.csi.rpc.CsiException;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeSet;

/**
 * What a CreateVolume request asks for once checked: the name, the exact size of the volume, how
 * its blocks are allocated, the nodes it may go to, the content it starts with, if any, and its IO
 * limits (the mutable parameters, {@link IoLimitParameters}).
 *
 * <p>The parameters' and mutable parameters' keys are parsed by {@link RequestKeys}, as
 * ValidateVolumeCapabilities and ControllerModifyVolume parse them. The keys Kubernetes adds are accepted, any other refused (LocalParameters.STORAGE_CLASS).
 * The filesystem made is the capability's fs_type; a filesystem key among the parameters (the
 * deprecated {@code fsType}, which the provisioner passes through) must agree with it.
 */
record VolumeRequest(String name, long capacityBytes, PoolRequest pool, TopologyRequirement requirements,
        Optional<VolumeContentSource> source, CapacityRange range, long minimumBytes, IoLimits ioLimits, boolean encrypted) {

    static final long MIB = 1L << 20;
    static final long DEFAULT_BYTES = 1L << 30;
    /** mkfs.xfs refuses filesystems smaller than 300 MiB. */
    static final long XFS_MIN_BYTES = 300 * MIB;

    static VolumeRequest of(CreateVolumeRequest request) {
        CreateChecks.name(request);
        new LocalCapabilities().require(request.getVolumeCapabilitiesList(), "volume_capabilities");
        requireFsTypeAgrees(request.getParametersMap(), request.getVolumeCapabilitiesList());
        long minimum = MIB;
        for (VolumeCapability capability : request.getVolumeCapabilitiesList()) {
            if (capability.hasMount() && LocalCapabilities.fsType(capability).equals("xfs")) {
                minimum = XFS_MIN_BYTES;
            }
        }
        RequestKeys keys = RequestKeys.of(request.getParametersMap(), request.getMutableParamsMap());
        return new VolumeRequest(request.getName(), size(request.getCapacityRange(), minimum), keys.pool(), request.getAccessibilityRequirements(),
                request.hasVolumeContentSource() ? Optional.of(request.getVolumeContentSource()) : Optional.empty(),
                request.getCapacityRange(), minimum, keys.ioLimits(), keys.encrypted());
    }

    /**
     * The request for a copy of a source of {@code sourceBytes}: without required_bytes, as large
     * as the source (not the default size), OUT_OF_RANGE when that is above limit_bytes; a size
     * asked for that is below the source's is the agent's to refuse (OUT_OF_RANGE).
     */
    VolumeRequest copying(long sourceBytes) {
        if (range.getRequiredBytes() > 0) {
            return this;
        }
        long size = Math.max(minimumBytes, Math.ceilDiv(sourceBytes, MIB) * MIB);
        if (range.getLimitBytes() > 0 && size > range.getLimitBytes()) {
            throw CsiException.outOfRange("capacity_range limit_bytes " + range.getLimitBytes() + " is below the size of the content source ("
                    + size + " bytes)");
        }
        return new VolumeRequest(name, size, pool, requirements, source, range, minimumBytes, ioLimits, encrypted);
    }

    /** How the volume's blocks are allocated: the image pool's allocation, or an LVM volume's type (thin: sparse, linear: full). */
    Allocation allocation() {
        return pool.allocation();
    }

    /** The size to allocate: the required bytes (or a default) rounded up to whole MiB, at least {@code minimum}. */
    static long size(CapacityRange range, long minimum) {
        CreateChecks.range(range);
        long required = range.getRequiredBytes();
        long limit = range.getLimitBytes();
        long wanted = required > 0 ? required : (limit > 0 ? Math.min(limit, DEFAULT_BYTES) : DEFAULT_BYTES);
        long size = Math.max(minimum, Math.ceilDiv(wanted, MIB) * MIB);
        if (limit > 0 && size > limit) {
            throw CsiException.outOfRange("capacity_range limit_bytes " + limit + " is below the smallest volume this "
                    + "driver can make for the request (" + size + " bytes: whole MiB, 300 MiB for xfs)");
        }
        return size;
    }

    /** Why the StorageClass parameters would be refused by CreateVolume, or empty when they are fine. */
    static Optional<String> parameterProblem(Map<String, String> parameters) {
        try {
            RequestKeys.of(parameters, Map.of());
            return Optional.empty();
        } catch (CsiException e) {
            return Optional.of(e.getMessage());
        }
    }

    /**
     * INVALID_ARGUMENT when a filesystem key of the parameters names a filesystem a local volume
     * cannot have, or another than a capability's fs_type: the capability decides what is made,
     * and through the provisioner the two always agree, so only a hand-made call can meet this. A
     * capability without fs_type (the driver's default) names none; a block claim of the class
     * (block capabilities only) makes no filesystem at all, so the key does not matter to it.
     */
    private static void requireFsTypeAgrees(Map<String, String> parameters, List<VolumeCapability> capabilities) {
        Optional<KubernetesKeys.FsTypeKey> named = KubernetesKeys.fsType(parameters);
        if (named.isEmpty() || capabilities.stream().noneMatch(VolumeCapability::hasMount)) {
            return;
        }
        String key = CsiException.printable(named.get().key());
        String value = CsiException.printable(named.get().value());
        if (!LocalCapabilities.FS_TYPES.contains(named.get().value())) {
            throw CsiException.invalidArgument("StorageClass parameter " + key + " '" + value
                    + "' is not a filesystem a local volume can have; use one of " + new TreeSet<>(LocalCapabilities.FS_TYPES));
        }
        for (VolumeCapability capability : capabilities) {
            String fsType = capability.getMount().getFsType();
            if (capability.hasMount() && !fsType.isEmpty() && !fsType.equals(named.get().value())) {
                throw CsiException.invalidArgument("StorageClass parameter " + key + " is '" + value
                        + "' but the volume capability's fs_type is '" + CsiException.printable(fsType) + "'");
            }
        }
    }
}
