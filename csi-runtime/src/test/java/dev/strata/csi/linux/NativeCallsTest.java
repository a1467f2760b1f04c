package dev.strata.csi.linux;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.IOException;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/** Where NativeCalls runs work: never on a virtual thread, and only one hand-over per piece of work. */
class NativeCallsTest {

    private final NativeCalls calls = new NativeCalls();

    @Test
    void aPlatformThreadRunsTheWorkItself() throws Exception {
        Thread caller = Thread.currentThread();
        assertSame(caller, calls.run(RuntimeException.class, Thread::currentThread));
    }

    @Test
    void aVirtualThreadHandsTheWorkToAPlatformThreadOnceAndGetsItsFailure() throws Exception {
        AtomicReference<Object> seen = new AtomicReference<>();
        Thread caller = Thread.ofVirtual().start(() -> {
            try {
                Thread[] threads = calls.run(Exception.class,
                        () -> new Thread[] {Thread.currentThread(), calls.run(RuntimeException.class, Thread::currentThread)});
                assertFalse(threads[0].isVirtual());
                assertSame(threads[0], threads[1], "nested work stays on the thread it was handed to");
                IOException failure = assertThrows(IOException.class, () -> calls.run(IOException.class, () -> {
                    throw new IOException("refused");
                }));
                seen.set(failure.getMessage());
            } catch (Throwable e) {
                seen.set(e);
            }
        });
        caller.join();
        assertEquals("refused", seen.get());
    }
}
