package dev.strata.csi.rpc;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * One operation per volume at a time. The sidecars retry on ABORTED, so a second call on a busy
 * volume is refused at once instead of queued: it can never run twice, and calls on other volumes
 * are not held up.
 */
public final class VolumeLocks {

    private final Set<String> busy = ConcurrentHashMap.newKeySet();

    /** A held lock on {@code key}; close it to release. */
    public final class Held implements AutoCloseable {
        private final String key;

        private Held(String key) {
            this.key = key;
        }

        @Override
        public void close() {
            busy.remove(key);
        }
    }

    public Held acquire(String key) {
        if (!busy.add(key)) {
            throw CsiException.aborted("an operation on " + key + " is already in progress");
        }
        return new Held(key);
    }
}
