package dev.strata.csi.system;

import dev.strata.csi.linux.Kernel;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A process for {@link TransientLockTest}: its threads take and let go of one {@link TransientLock}
 * as fast as they can, and while holding it mark the directory as held (a file made with O_EXCL:
 * a second holder finds it there) and add one to a counter file by reading and rewriting it (one
 * that finds it empty meets another holder rewriting it). It
 * says "ready", waits for the go file, and prints how often it found another holder.
 * Arguments: directory, threads, rounds per thread.
 */
public final class LockHammer {

    private LockHammer() {}

    public static void main(String[] args) throws Exception {
        Path dir = Path.of(args[0]);
        int threads = Integer.parseInt(args[1]);
        int rounds = Integer.parseInt(args[2]);
        Kernel kernel = new Kernel();
        AtomicInteger overlaps = new AtomicInteger();
        System.out.println("ready");
        while (!Files.exists(dir.resolve("go"))) {
            Thread.sleep(1);
        }
        List<Thread> running = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            running.add(Thread.ofPlatform().start(() -> {
                try {
                    for (int i = 0; i < rounds; i++) {
                        try (TransientLock held = TransientLock.acquire(kernel, dir.resolve("the.lock"), Duration.ofSeconds(60)).orElseThrow()) {
                            Path inside = dir.resolve("inside");
                            try {
                                Files.createFile(inside);
                            } catch (FileAlreadyExistsException e) {
                                overlaps.incrementAndGet();
                            }
                            Path counter = dir.resolve("counter");
                            String count = Files.readString(counter);
                            if (count.isEmpty()) { // another holder is rewriting it this moment
                                overlaps.incrementAndGet();
                            } else {
                                Thread.yield();
                                Files.writeString(counter, String.valueOf(Integer.parseInt(count) + 1));
                            }
                            Files.deleteIfExists(inside);
                        }
                    }
                } catch (Exception e) {
                    e.printStackTrace();
                    System.exit(2);
                }
            }));
        }
        for (Thread thread : running) {
            thread.join();
        }
        System.out.println("overlaps " + overlaps.get());
        System.exit(0);
    }
}
