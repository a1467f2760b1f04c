package dev.strata.csi.system;

import dev.strata.csi.rpc.CsiException;
import java.time.Duration;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.FutureTask;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Runs file system work on a network mount with a deadline. A server that does not answer blocks
 * the calling thread in the kernel, uninterruptibly; the work therefore runs on a thread of its
 * own, and the caller gets UNAVAILABLE when the deadline passes while that thread waits on.
 */
public final class Bounded {

    private Bounded() {}

    public interface Work<T> {
        T call() throws Exception;
    }

    public static <T> T call(Duration deadline, String what, Work<T> work) throws Exception {
        FutureTask<T> task = new FutureTask<>((Callable<T>) work::call);
        Thread.ofPlatform().daemon().name("bounded: " + what).start(task);
        try {
            return task.get(deadline.toMillis(), TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            throw CsiException.unavailable(what + " did not finish within " + deadline.toSeconds()
                    + " s; is the NFS server reachable?");
        } catch (ExecutionException e) {
            if (e.getCause() instanceof Exception cause) {
                throw cause;
            }
            throw e;
        }
    }
}
