package dev.strata.csi.controller.nfs;

import dev.strata.csi.linux.SyscallException;
import java.io.IOException;
import java.nio.file.Path;
import java.util.OptionalLong;

/**
 * Project quotas on the filesystem of an export that controller-server sees as a local filesystem
 * (xfs, or ext4, mounted with project quotas): a project id marks a directory and what is made in
 * it, and the filesystem counts their blocks against the project's limit. Ids are 32-bit unsigned,
 * passed as {@code long}.
 */
public interface ProjectQuotas {

    /**
     * Gives {@code dir}, and the directories and regular files already in it, project id {@code id};
     * directories with inheritance, so what is made in them later gets the id too. Symbolic links
     * are never followed. The directory itself is marked last, so once it carries the id the work
     * is done and a repeat is one read.
     */
    void assign(Path dir, long id) throws SyscallException, IOException;

    /**
     * Sets the block hard limit of project {@code id} on the filesystem {@code onFilesystem} lies on
     * to {@code bytes}, rounded up to whole KiB, without a soft limit; 0 lifts the limit.
     */
    void limit(Path onFilesystem, long id, long bytes) throws SyscallException;

    /** The first project id from {@code from} on that has blocks, files or limits on the filesystem, if any. */
    OptionalLong nextInUse(Path onFilesystem, long from) throws SyscallException;
}
