package dev.strata.csi.controller.local;

import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.agent.api.Volume;
import dev.strata.csi.agent.api.PoolKind;
import dev.strata.csi.agent.api.PoolStatus;
import dev.strata.csi.backend.local.LocalParameters;
import dev.strata.csi.controller.agents.AgentDirectory;
import dev.strata.csi.rpc.CsiException;
import java.util.Map;
import java.util.Optional;

/**
 * Which pool of a node a StorageClass's volumes go into, and of what kind (docs/parameters.md):
 * {@code pool: image} (the default) with its {@code allocation}, or {@code pool: lvm} with its
 * {@code lvType} ({@code thin}, the default, is sparse; {@code linear} takes every extent at
 * creation, as full allocation does) and, for thin volumes, {@code thinOvercommitRatio} (how many
 * times the thin pool's size its volumes' sizes may add up to; 1, the default: no overcommit). A
 * key of the other pool is refused, so a StorageClass says exactly one thing.
 */
record PoolRequest(PoolKind kind, Allocation allocation, double thinOvercommitRatio) {

    /** More would let a thin pool promise a hundred times what it holds: a typo, not a policy. */
    static final double MAX_RATIO = 100;

    static PoolRequest of(Map<String, String> parameters) {
        LocalParameters.STORAGE_CLASS.require(parameters);
        String pool = parameters.getOrDefault(LocalParameters.POOL, "image");
        return switch (pool) {
            case "image" -> {
                refuse(parameters, LocalParameters.LV_TYPE, "image");
                refuse(parameters, LocalParameters.THIN_OVERCOMMIT_RATIO, "image");
                yield new PoolRequest(PoolKind.POOL_IMAGE, allocation(parameters), 1);
            }
            case "lvm" -> {
                refuse(parameters, LocalParameters.ALLOCATION, "lvm");
                String type = parameters.getOrDefault(LocalParameters.LV_TYPE, "thin");
                double ratio = overcommitRatio(parameters);
                yield switch (type) {
                    case "thin" -> new PoolRequest(PoolKind.POOL_LVM, Allocation.SPARSE, ratio);
                    case "linear" -> {
                        if (parameters.containsKey(LocalParameters.THIN_OVERCOMMIT_RATIO)) {
                            throw CsiException.invalidArgument("parameter " + LocalParameters.THIN_OVERCOMMIT_RATIO + " is for "
                                    + LocalParameters.LV_TYPE + ": thin; a linear volume always has its extents");
                        }
                        yield new PoolRequest(PoolKind.POOL_LVM, Allocation.FULL, 1);
                    }
                    default -> throw CsiException.invalidArgument("parameter " + LocalParameters.LV_TYPE
                            + " must be thin or linear, got '" + CsiException.printable(type) + "'");
                };
            }
            default -> throw CsiException.invalidArgument("parameter " + LocalParameters.POOL + " must be image or lvm, got '"
                    + CsiException.printable(pool) + "'");
        };
    }

    /** What a volume of this request can get on the agent's node; empty when the node has no such pool. */
    Optional<Long> available(AgentDirectory.Agent agent) {
        return agent.pool(kind).map(this::available);
    }

    /** What a volume of this request can get in {@code pool}, a pool of its kind. */
    long available(PoolStatus pool) {
        if (kind != PoolKind.POOL_LVM) {
            return pool.getAvailableBytes();
        }
        if (allocation == Allocation.FULL) {
            return pool.getLinearAvailableBytes();
        }
        if (thinOvercommitRatio <= 1) {
            return pool.getAvailableBytes();
        }
        return pool.getThinFull() ? 0 : Math.max(0, (long) (pool.getThinDataBytes() * thinOvercommitRatio) - pool.getThinReservedBytes());
    }

    /** Whether {@code volume} is in the pool this request asks for. */
    boolean holds(Volume volume) {
        return kindOf(volume) == kind;
    }

    /** The pool of a volume as its agent reports it; unset: the image pool (whose volumes leave it unset). */
    static PoolKind kindOf(Volume volume) {
        return volume.getPool() == PoolKind.POOL_LVM ? PoolKind.POOL_LVM : PoolKind.POOL_IMAGE;
    }

    /** For messages: "image pool", "LVM pool". */
    String describe() {
        return describe(kind);
    }

    static String describe(PoolKind kind) {
        return kind == PoolKind.POOL_LVM ? "LVM pool" : "image pool";
    }

    /**
     * The keys of the volume context that say what the volume is, each a key its pool's StorageClass
     * takes: the image pool's allocation (sparse or full); an LVM volume's pool and lvType (thin or
     * linear), never an allocation, which its StorageClass may not set.
     */
    static void putContext(Volume volume, Map<String, String> context) {
        if (kindOf(volume) == PoolKind.POOL_LVM) {
            context.put(LocalParameters.POOL, "lvm");
            context.put(LocalParameters.LV_TYPE, volume.getAllocation() == Allocation.FULL ? "linear" : "thin");
        } else {
            context.put(LocalParameters.ALLOCATION, volume.getAllocation() == Allocation.FULL ? "full" : "sparse");
        }
    }

    private static Allocation allocation(Map<String, String> parameters) {
        String value = parameters.getOrDefault(LocalParameters.ALLOCATION, "sparse");
        return switch (value) {
            case "sparse" -> Allocation.SPARSE;
            case "full" -> Allocation.FULL;
            default -> throw CsiException.invalidArgument("parameter " + LocalParameters.ALLOCATION + " must be sparse or full, got '"
                    + CsiException.printable(value) + "'");
        };
    }

    private static double overcommitRatio(Map<String, String> parameters) {
        String value = parameters.getOrDefault(LocalParameters.THIN_OVERCOMMIT_RATIO, "1");
        double ratio;
        try {
            ratio = Double.parseDouble(value);
        } catch (NumberFormatException e) {
            ratio = Double.NaN;
        }
        if (!(ratio >= 1 && ratio <= MAX_RATIO) || !value.matches("[0-9]+(\\.[0-9]+)?")) {
            throw CsiException.invalidArgument("parameter " + LocalParameters.THIN_OVERCOMMIT_RATIO + " must be a number from 1 (no "
                    + "overcommit) to " + (int) MAX_RATIO + ", got '" + CsiException.printable(value) + "'");
        }
        return ratio;
    }

    /** INVALID_ARGUMENT for a key another pool than {@code pool} takes. */
    private static void refuse(Map<String, String> parameters, String key, String pool) {
        if (parameters.containsKey(key)) {
            String owner = key.equals(LocalParameters.ALLOCATION) ? "pool: image (an LVM volume's is its " + LocalParameters.LV_TYPE
                    + ": thin, allocated on write, or linear, every extent at creation)" : "pool: lvm";
            throw CsiException.invalidArgument("parameter " + key + " is for " + owner + ", and this StorageClass has pool: " + pool);
        }
    }
}
