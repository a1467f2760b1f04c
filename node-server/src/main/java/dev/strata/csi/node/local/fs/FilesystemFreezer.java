package dev.strata.csi.node.local.fs;

import dev.strata.csi.node.local.DeviceException;
import java.nio.file.Path;

/**
 * Freezes a mounted filesystem (FIFREEZE: writes are flushed, the journal committed, and new
 * writes wait) and thaws it (FITHAW), so that a copy of its device is consistent without journal
 * replay. A freeze outlives the process that made it: whoever freezes must thaw, also after a
 * crash (the pool records each freeze: {@code pool.Freezes}).
 */
public interface FilesystemFreezer {

    /** Freezes the filesystem mounted at {@code mountPoint}. */
    void freeze(Path mountPoint) throws DeviceException;

    /** Thaws the filesystem mounted at {@code mountPoint}; false when it was not frozen. */
    boolean thaw(Path mountPoint) throws DeviceException;
}
