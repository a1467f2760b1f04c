package dev.strata.csi.controller.nfs;

import dev.strata.csi.linux.SyscallException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Stream;
import jnr.constants.platform.Errno;

/**
 * An in-memory stand-in for {@link SystemProjectQuotas}, for unit tests on a kernel without
 * quotas and without root: which directory carries which project id ({@link #projects}), each
 * project's block limit ({@link #limits}, gone when set to 0), and every call in order
 * ({@link #calls}). As on the kernel, a project id is in use while a directory that carries it
 * exists, while it has a limit, or while files elsewhere on the filesystem carry it
 * ({@link #usedElsewhere}); nextInUse finds the lowest such id from the one given.
 *
 * <p>Where it differs: what is made later in a marked directory is not tracked (only the
 * directory), and nothing is counted against a limit. {@link #failAssign} and {@link #failLimit}
 * fail the next call with the errno the kernel would give (FS_IOC_FSSETXATTR, quotactl);
 * {@link #onLimit} runs inside each limit call, to see what the controller did before it.
 */
final class InMemoryProjectQuotas implements ProjectQuotas {
    final Map<Path, Long> projects = new ConcurrentHashMap<>();
    final Map<Long, Long> limits = new ConcurrentHashMap<>();
    final Set<Long> usedElsewhere = ConcurrentHashMap.newKeySet();
    final List<String> calls = Collections.synchronizedList(new ArrayList<>());
    volatile Errno failAssign;
    volatile Errno failLimit;
    volatile Runnable onLimit = () -> {};

    @Override
    public void assign(Path dir, long id) throws SyscallException {
        calls.add("assign " + dir + " " + id);
        Errno failure = failAssign;
        failAssign = null;
        fail("FS_IOC_FSSETXATTR", failure);
        projects.put(dir, id);
    }

    @Override
    public void limit(Path onFilesystem, long id, long bytes) throws SyscallException {
        calls.add("limit " + id + " " + bytes);
        Errno failure = failLimit;
        failLimit = null;
        fail("quotactl_fd(Q_SETQUOTA)", failure);
        onLimit.run();
        if (bytes == 0) {
            limits.remove(id);
        } else {
            limits.put(id, bytes);
        }
    }

    @Override
    public OptionalLong nextInUse(Path onFilesystem, long from) {
        calls.add("next " + from);
        // A project id counts while files carry it: the directories that are still there.
        Stream<Long> onFiles = projects.entrySet().stream().filter(entry -> Files.exists(entry.getKey())).map(Map.Entry::getValue);
        return Stream.of(usedElsewhere.stream(), limits.keySet().stream(), onFiles)
                .flatMap(ids -> ids).filter(id -> id >= from).mapToLong(Long::longValue).min();
    }

    private static void fail(String call, Errno errno) throws SyscallException {
        if (errno != null) {
            throw new SyscallException(call, errno.intValue());
        }
    }
}
