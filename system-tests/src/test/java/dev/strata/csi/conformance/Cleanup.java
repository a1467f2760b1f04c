package dev.strata.csi.conformance;

import com.google.protobuf.Message;
import csi.v1.Csi.ControllerUnpublishVolumeRequest;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.NodeUnpublishVolumeRequest;
import csi.v1.Csi.NodeUnstageVolumeRequest;
import io.grpc.StatusRuntimeException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;

/**
 * The calls that undo what a test made, kept as the requests themselves: a test registers the
 * undo of each step as soon as the step succeeded, and whatever it did not undo itself is sent
 * after it, last step first (unpublish, unstage, controller unpublish, delete).
 */
final class Cleanup {

    private final ConformanceTarget target;
    private final Deque<Message> pending = new ArrayDeque<>();

    Cleanup(ConformanceTarget target) {
        this.target = target;
    }

    /** Registers {@code undo} (a DeleteVolume, ControllerUnpublish, NodeUnstage or NodeUnpublish request). */
    void add(Message undo) {
        pending.push(undo);
    }

    /** Sends {@code undo} now, as a step of the test, and takes it off the list. */
    void undo(Message undo) {
        send(undo);
        pending.remove(undo);
    }

    /** Sends every undo still pending; fails listing the ones the driver refused, after trying all. */
    void run() {
        List<String> failures = new ArrayList<>();
        while (!pending.isEmpty()) {
            Message undo = pending.pop();
            try {
                send(undo);
            } catch (StatusRuntimeException e) {
                failures.add(undo.getDescriptorForType().getName() + " {" + undo.toString().replace('\n', ' ').strip()
                        + "}: " + e.getStatus());
            }
        }
        if (!failures.isEmpty()) {
            throw new AssertionError("cleanup failed: " + String.join("; ", failures));
        }
    }

    private void send(Message undo) {
        switch (undo) {
            case NodeUnpublishVolumeRequest request -> target.node().nodeUnpublishVolume(request);
            case NodeUnstageVolumeRequest request -> target.node().nodeUnstageVolume(request);
            case ControllerUnpublishVolumeRequest request -> target.controller().controllerUnpublishVolume(request);
            case DeleteVolumeRequest request -> target.controller().deleteVolume(request);
            default -> throw new IllegalArgumentException("not an undo request: " + undo.getDescriptorForType().getName());
        }
    }
}
