package dev.strata.csi.node.agent;

import dev.strata.csi.agent.api.ContentData;
import dev.strata.csi.agent.api.ContentStart;
import dev.strata.csi.agent.api.ContentZero;
import dev.strata.csi.agent.api.WriteContentRequest;
import dev.strata.csi.log.Log;
import dev.strata.csi.node.local.CrashPoint;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.image.ImageContent;
import dev.strata.csi.node.local.pool.IncomingContent;
import dev.strata.csi.node.local.pool.IncomingCopies;
import dev.strata.csi.node.local.pool.Receiving;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.rpc.VolumeLocks;
import dev.strata.csi.system.Crashes;
import io.grpc.Status;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.Optional;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.FutureTask;
import java.util.concurrent.TimeUnit;

/**
 * WriteContent and WriteSnapshotCopy: another node's content, relayed by controller-server, written
 * into a RECEIVING volume ({@link IncomingCopies}) or snapshot copy
 * ({@link dev.strata.csi.node.local.pool.SnapshotCopies}) of whichever pool holds its record
 * ({@link Destination}) on a thread of its own (messages arrive on the transport's thread, which must not wait for
 * the disk), one message requested at a time, so the stream never holds more than the transport's
 * window. Every 64 MiB the volume is synced and the record says how far it is on disk: a stream
 * cut short (either side or the controller died) resumes there. That checkpoint runs beside the
 * writing, on a thread of its own, one at a time: the disk writes the last 64 MiB back while the
 * next arrive, rather than the stream standing still for every sync. At the end the volume is synced,
 * its own digest compared with the sender's, and only then is it READY. A damaged chunk or another
 * digest removes the partial volume and answers DATA_LOSS: nothing unverified is ever READY.
 * A snapshot copy built on a base takes zero ranges too: its stream holds only what changed
 * since the base, and a range that reads zeros there is made to read zeros here.
 */
final class ContentReceiver {

    /** Data written between two records of progress: at most this much is received again after a crash. */
    static final long CHECKPOINT_BYTES = 64L << 20;
    /** The largest data chunk taken; senders send {@link ImageContent#CHUNK}. */
    private static final int MAX_CHUNK = 4 * ImageContent.CHUNK;

    private final VolumeLocks locks;
    private final TransferMetrics metrics;
    private final Crashes<CrashPoint> crashes;
    private final Log log;

    ContentReceiver(VolumeLocks locks, TransferMetrics metrics, Crashes<CrashPoint> crashes, Log log) {
        this.locks = locks;
        this.metrics = metrics;
        this.crashes = crashes;
        this.log = log;
    }

    /**
     * What a stream writes into, by the name its messages carry, and what its answer says once the
     * content is complete: a volume, or a snapshot copy. {@code R} is the answer.
     */
    interface Destination<R> {
        /** What the name is of, as messages put it: "volume", "snapshot copy". */
        String noun();

        /** The key its name goes under in the log: "volume", "snapshot". */
        String logKey();

        /** The lock the stream holds; INVALID_ARGUMENT for a name no such thing can have. */
        String lockKey(String name);

        /** The RECEIVING thing {@code name} in whichever pool holds its record. */
        Receiving receiving(String name) throws IOException;

        /** The point a crash test stops at once the whole content is written and synced, before its digest is checked. */
        Optional<CrashPoint> written();

        /** The content is complete and verified: recorded so, and the answer, with the inventory's generation. */
        R finish(String name, ContentStart start, long writtenBytes) throws IOException;
    }

    /** The end of a stream, as the writing thread learns it. */
    private sealed interface Event {}
    private record Message(WriteContentRequest request) implements Event {}
    private record Completed() implements Event {}
    private record Failed(Throwable cause) implements Event {}

    /** Starts the writing thread and returns the stream's observer, which hands each message to it. */
    <R> StreamObserver<WriteContentRequest> receive(ServerCallStreamObserver<R> out, Destination<R> destination) {
        BlockingQueue<Event> events = new ArrayBlockingQueue<>(4); // one message asked for at a time, and the end
        out.disableAutoRequest();
        out.request(1);
        Thread.ofPlatform().daemon(true).name("receive").start(() -> new Stream<>(out, events, destination).run());
        return new StreamObserver<>() {
            @Override
            public void onNext(WriteContentRequest request) {
                events.add(new Message(request));
            }

            @Override
            public void onError(Throwable t) {
                events.add(new Failed(t));
            }

            @Override
            public void onCompleted() {
                events.add(new Completed());
            }
        };
    }

    /** One stream's state, on its writing thread. */
    private final class Stream<R> {
        private final ServerCallStreamObserver<R> out;
        private final BlockingQueue<Event> events;
        private final Destination<R> destination;
        private final long started = System.nanoTime();
        private String name;
        private ContentStart start;
        /** The pool's side of the copy: the pool that has the record. */
        private Receiving incoming;
        private IncomingContent target;
        /** Everything of the content below this offset is written (recorded once synced). */
        private long position;
        /** Where the latest checkpoint syncs up to; the record says so once it is done. */
        private long checkpointed;
        /** What the record says is on disk: set by the checkpoint's thread. */
        private volatile long recorded;
        private long written;
        /** Checkpoints of this stream recorded: set by the checkpoint's thread. */
        private volatile int checkpoints;
        /** The checkpoint syncing beside the writing, until awaited; at most one at a time, so records come in order. */
        private FutureTask<Void> syncing;
        /**
         * A checkpoint failed: its sync may have taken the file's write error, which Linux reports
         * once, so a later sync succeeding proves nothing and no more progress is recorded.
         */
        private boolean checkpointFailed;

        Stream(ServerCallStreamObserver<R> out, BlockingQueue<Event> events, Destination<R> destination) {
            this.out = out;
            this.events = events;
            this.destination = destination;
        }

        void run() {
            VolumeLocks.Held held = null;
            try {
                WriteContentRequest first = next();
                name = first.getName();
                if (name.isEmpty()) {
                    throw CsiException.missing("name");
                }
                held = locks.acquire(destination.lockKey(name));
                incoming = destination.receiving(name);
                Receiving.Progress record = start(first);
                target = incoming.open();
                while (true) {
                    WriteContentRequest request = next();
                    if (!request.getName().equals(name)) {
                        throw CsiException.invalidArgument("every message of a stream names one " + destination.noun() + ": " + name);
                    }
                    switch (request.getChunk().getKindCase()) {
                        case DATA -> write(record, request.getChunk().getData());
                        case ZERO -> zero(record, request.getChunk().getZero());
                        case END -> {
                            out.onNext(finish(request.getChunk().getEnd().getSha256().toByteArray()));
                            out.onCompleted();
                            metrics.receiveEnded("complete", started);
                            return;
                        }
                        default -> throw CsiException.invalidArgument("a stream has one start, and data, zero ranges or its end after it");
                    }
                }
            } catch (StreamEnded e) {
                interrupted(e.getMessage());
                answer(CsiException.aborted(e.getMessage() + "; the retry resumes at " + recorded).toStatus());
            } catch (CsiException e) {
                if (e.code() == Status.Code.DATA_LOSS) {
                    discard(e.getMessage());
                } else {
                    interrupted(e.getMessage());
                }
                answer(e.toStatus());
            } catch (IOException | DeviceException e) {
                interrupted(e.toString());
                answer(CsiException.internal("cannot write " + destination.noun() + " " + name + ": " + CsiException.describe(e)).toStatus());
            } catch (InterruptedException e) {
                interrupted("interrupted");
                answer(Status.ABORTED.withDescription("interrupted"));
            } catch (RuntimeException e) { // a failure of the pool's (a record that cannot be written, say): recorded, answered
                interrupted(e.toString());
                answer(CsiException.internal("cannot receive " + destination.noun() + " " + name
                        + " (a fault of node-server; its log has the details)").toStatus());
            } finally {
                close();
                if (held != null) {
                    held.close();
                }
            }
        }

        /**
         * The stream's start, against the volume's record: the same content resumes where the
         * record says it is on disk; other content starts the volume over, empty.
         */
        private Receiving.Progress start(WriteContentRequest first) throws IOException, DeviceException {
            Receiving.Progress record = incoming.progress();
            if (!first.getChunk().hasStart()) {
                throw CsiException.invalidArgument("a stream begins with its start");
            }
            ContentStart start = first.getChunk().getStart();
            if (start.getTag().isEmpty()) {
                throw CsiException.missing("start.tag");
            }
            if (start.getSizeBytes() <= 0 || start.getSizeBytes() > record.capacityBytes()) {
                throw CsiException.outOfRange("content of " + start.getSizeBytes() + " bytes does not fit " + destination.noun() + " " + name
                        + " of " + record.capacityBytes() + " bytes");
            }
            if (!start.getBaseSnapshot().equals(record.baseSnapshot())) {
                throw CsiException.failedPrecondition(destination.noun() + " " + name + (record.baseSnapshot().isEmpty()
                        ? " is received whole" : " is built on snapshot " + record.baseSnapshot())
                        + "; the stream holds " + (start.getBaseSnapshot().isEmpty() ? "the whole content"
                        : "what changed since snapshot " + start.getBaseSnapshot()));
            }
            if (record.checksEncryption() && start.getEncrypted() != record.encrypted()) {
                throw CsiException.invalidArgument("volume " + name + " is to be " + (record.encrypted() ? "encrypted" : "plain")
                        + " but its source is " + (start.getEncrypted() ? "encrypted" : "plain")
                        + "; a copy holds its source's bytes, so its StorageClass must have the same encryption");
            }
            if (!start.getTag().equals(record.tag())) {
                if (start.getOffset() != 0) {
                    throw CsiException.failedPrecondition(destination.noun() + " " + name + " holds nothing of content " + start.getTag()
                            + "; its stream starts at 0, not " + start.getOffset());
                }
                if (record.receivedBytes() > 0 || !record.tag().isEmpty()) {
                    log.info("partly received " + destination.noun() + " holds other content; starting it over", destination.logKey(), name,
                            "had", record.tag(), "now", start.getTag());
                }
                record = incoming.restart(start.getTag());
            } else if (start.getOffset() > record.receivedBytes()) {
                throw CsiException.failedPrecondition(destination.noun() + " " + name + " holds " + record.receivedBytes()
                        + " bytes of its content on disk; a stream from " + start.getOffset() + " would leave a gap");
            } else if (start.getOffset() > 0) {
                log.info("resuming transfer", destination.logKey(), name, "from", start.getOffset());
            }
            position = start.getOffset();
            recorded = record.receivedBytes();
            checkpointed = position;
            this.start = start;
            return record;
        }

        private void write(Receiving.Progress record, ContentData data) throws IOException, InterruptedException {
            long offset = data.getOffset();
            int length = data.getData().size();
            checkRange(record, "chunk", offset, length, MAX_CHUNK);
            ByteBuffer bytes = data.getData().asReadOnlyByteBuffer(); // the message's own bytes, not a copy
            if (ImageContent.crc32c(bytes) != data.getCrc32C()) {
                throw CsiException.dataLoss("chunk at " + offset + " of " + destination.noun() + " " + name + " arrived damaged (CRC-32C)");
            }
            target.write(position, offset, bytes);
            position = offset + length;
            written += length;
            metrics.received(length);
            if (checkpoints > 0) {
                crashes.reach(CrashPoint.TRANSFER_WRITTEN);
            }
            if (position - checkpointed >= CHECKPOINT_BYTES) {
                startCheckpoint();
            }
        }

        /** A range the source reads as zeros, in a stream on a base: made to read zeros here (a hole where it can). */
        private void zero(Receiving.Progress record, ContentZero zero) throws IOException, InterruptedException {
            if (!target.onBase()) {
                throw CsiException.invalidArgument("zero ranges come only in a stream on a base snapshot");
            }
            checkRange(record, "zero range", zero.getOffset(), zero.getLength(), Long.MAX_VALUE);
            target.zero(zero.getOffset(), zero.getLength());
            position = zero.getOffset() + zero.getLength();
            if (position - checkpointed >= CHECKPOINT_BYTES) {
                startCheckpoint();
            }
        }

        private void checkRange(Receiving.Progress record, String what, long offset, long length, long longest) {
            if (offset < position || offset % ImageContent.BLOCK != 0 || length <= 0 || length > longest
                    || offset > record.capacityBytes() - length) {
                throw CsiException.invalidArgument(what + " at " + offset + " of " + length + " bytes: data and zero ranges come in order, "
                        + "at whole blocks, within the " + destination.noun() + "'s " + record.capacityBytes() + " bytes");
            }
        }

        /**
         * Syncs what is written so far, and records how far it goes, on a thread of its own while
         * the stream goes on: once the previous checkpoint is done, so that a record never says
         * less than the one before it.
         */
        private void startCheckpoint() throws IOException, InterruptedException {
            awaitCheckpoint();
            long upTo = position;
            checkpointed = upTo;
            FutureTask<Void> checkpoint = new FutureTask<>(() -> {
                syncAndRecord(upTo);
                checkpoints++; // this thread alone writes it, one checkpoint at a time
                crashes.reach(CrashPoint.TRANSFER_CHECKPOINTED);
                return null;
            });
            Thread.ofPlatform().daemon(true).name("checkpoint-" + name).start(checkpoint);
            syncing = checkpoint; // only once it runs: a thread that could not start leaves nothing to wait for
        }

        /** Waits for the checkpoint in progress, if any; its failure is this stream's. */
        private void awaitCheckpoint() throws IOException, InterruptedException {
            if (syncing == null) {
                return;
            }
            try {
                syncing.get();
            } catch (ExecutionException e) {
                checkpointFailed = true;
                switch (e.getCause()) {
                    case IOException io -> throw io;
                    case RuntimeException runtime -> throw runtime;
                    default -> throw new IOException(e.getCause());
                }
            } finally {
                if (syncing.isDone()) {
                    syncing = null;
                }
            }
        }

        /** Waits for the checkpoint in progress, if any, whatever its outcome: the stream ends anyway. */
        private void settleCheckpoint() {
            try {
                awaitCheckpoint();
            } catch (IOException | RuntimeException e) {
                log.warn("checkpoint failed", destination.logKey(), name, "error", e.toString());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }

        /** Syncs what is written up to {@code upTo} (and any more) and records it. */
        private void syncAndRecord(long upTo) throws IOException {
            target.sync();
            incoming.receivedUpTo(upTo);
            recorded = upTo;
        }

        private R finish(byte[] sent) throws IOException, InterruptedException {
            awaitCheckpoint();
            target.end(position);
            Optional<CrashPoint> written = destination.written();
            if (written.isPresent()) {
                crashes.reach(written.get());
            }
            byte[] mine = target.digest();
            if (!MessageDigest.isEqual(mine, sent)) {
                throw CsiException.dataLoss(destination.noun() + " " + name + " received content whose digest " + HexFormat.of().formatHex(mine)
                        + " differs from the sender's " + HexFormat.of().formatHex(sent));
            }
            crashes.reach(CrashPoint.TRANSFER_VERIFIED);
            R answer = destination.finish(name, start, this.written);
            log.info("content received", destination.logKey(), name, "data_bytes", this.written, "base", start.getBaseSnapshot(),
                    "seconds", String.format("%.1f", (System.nanoTime() - started) / 1e9));
            return answer;
        }

        /** The stream stopped before its end: what is written is recorded, for the retry to resume. */
        private void interrupted(String why) {
            metrics.receiveEnded("interrupted", started);
            if (target == null) {
                return;
            }
            settleCheckpoint();
            if (checkpointFailed) {
                log.warn("transfer interrupted after a failed checkpoint; the retry resumes from the last one recorded",
                        destination.logKey(), name, "received_bytes", recorded, "reason", why);
                return;
            }
            try {
                syncAndRecord(position);
                log.warn("transfer interrupted; the retry resumes", destination.logKey(), name, "received_bytes", recorded, "reason", why);
            } catch (IOException | RuntimeException e) {
                log.warn("transfer interrupted; progress not recorded", destination.logKey(), name, "reason", why, "error", e.toString());
            }
        }

        /** Damaged content: what was received goes, so that the retry starts over. */
        private void discard(String why) {
            metrics.receiveEnded("refused", started);
            log.error("content refused; partial " + destination.noun() + " removed", destination.logKey(), name, "reason", why);
            close();
            if (incoming == null) {
                return;
            }
            try {
                incoming.remove();
            } catch (Exception e) {
                log.error("cannot remove partial " + destination.noun(), destination.logKey(), name, "error", e.toString());
            }
        }

        private WriteContentRequest next() throws InterruptedException, StreamEnded {
            Event event = events.poll(ContentSender.STALL.toSeconds(), TimeUnit.SECONDS);
            if (event == null) {
                throw new StreamEnded("nothing arrived for " + ContentSender.STALL.toSeconds() + " s");
            }
            return switch (event) {
                case Message message -> {
                    out.request(1);
                    yield message.request();
                }
                case Completed completed -> throw new StreamEnded("the stream ended before its content did");
                case Failed failed -> throw new StreamEnded("the sender went away: " + Status.fromThrowable(failed.cause()));
            };
        }

        private void answer(Status status) {
            try {
                out.onError(status.asRuntimeException());
            } catch (RuntimeException e) {
                // the call ended meanwhile
            }
        }

        private void close() {
            if (target != null) {
                settleCheckpoint(); // the checkpoint's thread syncs this file
                try {
                    target.close();
                } catch (IOException e) {
                    // nothing written is lost: every checkpoint synced first
                } catch (DeviceException e) { // a logical volume left active: the next start deactivates it
                    log.warn("cannot release the storage received into", destination.logKey(), name, "error", e.getMessage());
                }
                target = null;
            }
        }
    }

    /** The stream stopped before its end (cancelled, silent, half-closed early). */
    private static final class StreamEnded extends Exception {
        StreamEnded(String message) {
            super(message, null, false, false);
        }
    }
}
