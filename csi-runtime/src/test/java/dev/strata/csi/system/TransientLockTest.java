package dev.strata.csi.system;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.strata.csi.linux.Kernel;
import dev.strata.csi.testing.FileTrees;
import dev.strata.csi.testing.Programs;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.ServerProcess;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

@Tag("root")
class TransientLockTest {

    @TempDir
    Path dir;

    private final Kernel kernel = new Kernel();

    @Test
    void theFileExistsWhileTheLockIsHeldAndAnotherTakerIsRefused() throws Exception {
        Path file = dir.resolve("a.lock");
        try (TransientLock held = TransientLock.tryAcquire(kernel, file).orElseThrow()) {
            assertTrue(Files.isRegularFile(file));
            assertEquals(Optional.empty(), TransientLock.tryAcquire(kernel, file), "another open file of this process");
            long before = System.nanoTime();
            assertEquals(Optional.empty(), TransientLock.acquire(kernel, file, Duration.ofMillis(300)));
            assertTrue(System.nanoTime() - before >= Duration.ofMillis(300).toNanos(), "waited the time given");
        }
        assertFalse(Files.exists(file), "removed when let go");
        TransientLock.tryAcquire(kernel, file).orElseThrow().close();
    }

    @Test
    void aWaitingTakerGetsTheLockOnceItIsLetGo() throws Exception {
        Path file = dir.resolve("a.lock");
        TransientLock held = TransientLock.tryAcquire(kernel, file).orElseThrow();
        Thread letGo = Thread.ofPlatform().start(() -> {
            try {
                Thread.sleep(200);
                held.close();
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        try (TransientLock taken = TransientLock.acquire(kernel, file, Duration.ofSeconds(10)).orElseThrow()) {
            assertTrue(Files.isRegularFile(file), "the taker's own file");
        }
        letGo.join();
    }

    /**
     * Four processes of two threads each take and let go of one lock 4,000 times in all. Each
     * holder removes the file before it lets go, so takers keep opening a file that is removed
     * under them: without the check that the path still names the locked file, two hold the lock
     * at once within a few hundred rounds (seen: overlaps and lost counts).
     */
    @Test
    void manyProcessesNeverHoldItAtOnce() throws Exception {
        hammer(List.of(dir), 500);
    }

    /**
     * The same over NFS, where hack/nfs-vm.sh provides a server (STRATA_NFS_TEST_EXPORT, NFSv4):
     * the export mounted twice without a shared cache and half the processes taking the lock
     * through each mount, so that the server decides between them as between two hosts; and a
     * file removed while open stays as the client's .nfsXXXX name until it is closed.
     */
    @Test
    void manyProcessesNeverHoldItAtOnceOverNfs() throws Exception {
        String export = System.getenv().getOrDefault("STRATA_NFS_TEST_EXPORT", "");
        assumeTrue(!export.isEmpty(), "no NFS server here; hack/nfs-vm.sh runs this test against one");
        Root.require();
        List<Path> mounts = List.of(Files.createDirectories(dir.resolve("client-a")), Files.createDirectories(dir.resolve("client-b")));
        List<Path> mounted = new ArrayList<>();
        try {
            for (Path mount : mounts) {
                Programs.run("mount", "-t", "nfs4", "-o", "nosharecache", export, mount.toString());
                mounted.add(mount);
            }
            String shared = "transient-lock-test-" + ProcessHandle.current().pid();
            Files.createDirectory(mounts.getFirst().resolve(shared));
            hammer(mounts.stream().map(mount -> mount.resolve(shared)).toList(), 30);
            for (String left : List.of("counter", "go", "")) {
                Files.delete(mounts.getFirst().resolve(shared).resolve(left));
            }
        } finally {
            for (Path mount : mounted.reversed()) {
                Programs.run("umount", mount.toString());
            }
        }
    }

    /**
     * Four processes of two threads each, taking the lock {@code rounds} times per thread, the
     * processes spread over {@code dirs} (one directory, reached by as many paths).
     */
    private static void hammer(List<Path> dirs, int rounds) throws Exception {
        int processes = 4;
        int threads = 2;
        Path dir = dirs.getFirst();
        Files.writeString(dir.resolve("counter"), "0");
        List<ServerProcess> hammers = new ArrayList<>();
        try {
            for (int i = 0; i < processes; i++) {
                hammers.add(ServerProcess.start(LockHammer.class, dirs.get(i % dirs.size()).toString(), String.valueOf(threads),
                        String.valueOf(rounds)));
            }
            for (ServerProcess hammer : hammers) {
                hammer.awaitOutput("ready");
            }
            Files.createFile(dir.resolve("go"));
            for (ServerProcess hammer : hammers) {
                assertEquals(0, hammer.exitCode(), hammer.output());
                assertTrue(hammer.output().contains("overlaps 0"), hammer.output());
            }
        } finally {
            hammers.forEach(ServerProcess::close);
        }
        assertEquals(processes * threads * rounds, Integer.parseInt(Files.readString(dir.resolve("counter"))), "no count lost");
        assertEquals(List.of("counter", "go"), FileTrees.list(dir), "no lock file left (nor an NFS client's name for one)");
    }
}
