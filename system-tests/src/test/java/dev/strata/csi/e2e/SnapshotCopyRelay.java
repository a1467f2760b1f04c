package dev.strata.csi.e2e;

import dev.strata.csi.agent.api.ContentChunk;
import dev.strata.csi.agent.api.ContentSource;
import dev.strata.csi.agent.api.NodeAgentGrpc;
import dev.strata.csi.agent.api.PoolKind;
import dev.strata.csi.agent.api.ReadContentRequest;
import dev.strata.csi.agent.api.ReceiveSnapshotCopyRequest;
import dev.strata.csi.agent.api.ReceiveSnapshotCopyResponse;
import dev.strata.csi.agent.api.Snapshot;
import dev.strata.csi.agent.api.WriteContentRequest;
import dev.strata.csi.agent.api.WriteSnapshotCopyResponse;
import io.grpc.CallCredentials;
import io.grpc.Context;
import io.grpc.ManagedChannel;
import io.grpc.stub.StreamObserver;
import java.util.Iterator;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

/**
 * The test in controller-server's place for a snapshot copy: ReceiveSnapshotCopy on the node that
 * keeps the copy, then a ReadContent of the origin's snapshot (on the base the receiver answers
 * with, from where it says it is) relayed into WriteSnapshotCopy. {@code stopAfter} data chunks
 * cut the stream short, as a lost connection does.
 */
final class SnapshotCopyRelay {

    private final CallCredentials token;

    SnapshotCopyRelay(CallCredentials token) {
        this.token = token;
    }

    ReceiveSnapshotCopyResponse receive(ManagedChannel to, String origin, Snapshot snapshot, String base, PoolKind pool) {
        return NodeAgentGrpc.newBlockingStub(to).withCallCredentials(token).withDeadlineAfter(60, TimeUnit.SECONDS)
                .receiveSnapshotCopy(ReceiveSnapshotCopyRequest.newBuilder().setName(snapshot.getName()).setOriginNode(origin)
                        .setSnapshot(snapshot).setBaseSnapshot(base).setPool(pool).build());
    }

    /** The whole copy: received, then relayed; the answer of WriteSnapshotCopy (or of the receive, when complete already). */
    WriteSnapshotCopyResponse copy(ManagedChannel from, String origin, Snapshot snapshot, ManagedChannel to, String base, PoolKind pool)
            throws Exception {
        ReceiveSnapshotCopyResponse receiving = receive(to, origin, snapshot, base, pool);
        if (receiving.hasSnapshot()) {
            return WriteSnapshotCopyResponse.newBuilder().setSnapshot(receiving.getSnapshot()).build();
        }
        return relay(from, snapshot.getName(), receiving, to, Integer.MAX_VALUE);
    }

    /** One stream, from where {@code receiving} says the copy is, of at most {@code stopAfter} data chunks. */
    WriteSnapshotCopyResponse relay(ManagedChannel from, String name, ReceiveSnapshotCopyResponse receiving, ManagedChannel to, int stopAfter)
            throws Exception {
        Context.CancellableContext reading = Context.current().withCancellation();
        Iterator<ContentChunk> read = reading.call(() -> NodeAgentGrpc.newBlockingStub(from).withCallCredentials(token)
                .withDeadlineAfter(300, TimeUnit.SECONDS)
                .readContent(ReadContentRequest.newBuilder().setSource(ContentSource.newBuilder().setSnapshot(name))
                        .setBaseSnapshot(receiving.getBaseSnapshot()).setTag(receiving.getTag()).setOffset(receiving.getReceivedBytes()).build()));
        CompletableFuture<WriteSnapshotCopyResponse> result = new CompletableFuture<>();
        StreamObserver<WriteContentRequest> write = NodeAgentGrpc.newStub(to).withCallCredentials(token)
                .withDeadlineAfter(300, TimeUnit.SECONDS).writeSnapshotCopy(Relays.answer(result));
        int data = 0;
        while (read.hasNext()) {
            ContentChunk chunk = read.next();
            if (chunk.hasData() && ++data > stopAfter) {
                write.onError(new IllegalStateException("cut short"));
                reading.cancel(null); // the sender lets the snapshot go
                break;
            }
            write.onNext(WriteContentRequest.newBuilder().setName(name).setChunk(chunk).build());
        }
        if (data <= stopAfter) {
            write.onCompleted();
        }
        try {
            return result.get(300, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            throw (Exception) e.getCause();
        }
    }
}
