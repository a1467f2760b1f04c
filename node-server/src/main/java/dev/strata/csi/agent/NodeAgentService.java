package dev.strata.csi.agent;

import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.agent.api.AttachImageRequest;
import dev.strata.csi.agent.api.AttachImageResponse;
import dev.strata.csi.agent.api.CreateImageRequest;
import dev.strata.csi.agent.api.CreateImageResponse;
import dev.strata.csi.agent.api.DeleteImageRequest;
import dev.strata.csi.agent.api.DeleteImageResponse;
import dev.strata.csi.agent.api.DetachImageRequest;
import dev.strata.csi.agent.api.DetachImageResponse;
import dev.strata.csi.agent.api.ExpandImageRequest;
import dev.strata.csi.agent.api.ExpandImageResponse;
import dev.strata.csi.agent.api.GetImageRequest;
import dev.strata.csi.agent.api.GetImageResponse;
import dev.strata.csi.agent.api.ListImagesRequest;
import dev.strata.csi.agent.api.ListImagesResponse;
import dev.strata.csi.agent.api.NodeAgentGrpc;
import dev.strata.csi.backend.local.ImagePool;
import dev.strata.csi.backend.local.VolumeId;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.rpc.Rpc;
import dev.strata.csi.rpc.VolumeLocks;
import io.grpc.stub.StreamObserver;

/** The node agent's API for controller-server: the pool operations, one at a time per image. */
public final class NodeAgentService extends NodeAgentGrpc.NodeAgentImplBase {

    private final ImagePool pool;
    private final VolumeLocks locks;

    /** {@code locks} is shared with the Node service: a volume is never staged while it is detached. */
    public NodeAgentService(ImagePool pool, VolumeLocks locks) {
        this.pool = pool;
        this.locks = locks;
    }

    @Override
    public void createImage(CreateImageRequest request, StreamObserver<CreateImageResponse> response) {
        Rpc.answer(response, () -> {
            if (request.getCapacityBytes() <= 0) {
                throw CsiException.invalidArgument("capacity_bytes must be positive");
            }
            if (request.getAllocation() != Allocation.SPARSE && request.getAllocation() != Allocation.FULL) {
                throw CsiException.invalidArgument("allocation must be SPARSE or FULL, got " + request.getAllocationValue());
            }
            try (var held = locks.acquire(name(request.getName()))) {
                return CreateImageResponse.newBuilder()
                        .setImage(pool.create(request.getName(), request.getCapacityBytes(), request.getAllocation()))
                        .build();
            }
        });
    }

    @Override
    public void deleteImage(DeleteImageRequest request, StreamObserver<DeleteImageResponse> response) {
        Rpc.answer(response, () -> {
            try (var held = locks.acquire(name(request.getName()))) {
                pool.delete(request.getName());
                return DeleteImageResponse.getDefaultInstance();
            }
        });
    }

    @Override
    public void attachImage(AttachImageRequest request, StreamObserver<AttachImageResponse> response) {
        Rpc.answer(response, () -> {
            try (var held = locks.acquire(name(request.getName()))) {
                return AttachImageResponse.newBuilder().setImage(pool.attach(request.getName(), request.getNodeId())).build();
            }
        });
    }

    @Override
    public void detachImage(DetachImageRequest request, StreamObserver<DetachImageResponse> response) {
        Rpc.answer(response, () -> {
            try (var held = locks.acquire(name(request.getName()))) {
                pool.detach(request.getName(), request.getNodeId());
                return DetachImageResponse.getDefaultInstance();
            }
        });
    }

    @Override
    public void expandImage(ExpandImageRequest request, StreamObserver<ExpandImageResponse> response) {
        Rpc.answer(response, () -> {
            if (request.getCapacityBytes() <= 0) {
                throw CsiException.invalidArgument("capacity_bytes must be positive");
            }
            try (var held = locks.acquire(name(request.getName()))) {
                return ExpandImageResponse.newBuilder().setImage(pool.expand(request.getName(), request.getCapacityBytes())).build();
            }
        });
    }

    @Override
    public void getImage(GetImageRequest request, StreamObserver<GetImageResponse> response) {
        Rpc.answer(response, () -> {
            // Taking the lock: an image being created or deleted is neither there nor gone yet.
            try (var held = locks.acquire(name(request.getName()))) {
                return GetImageResponse.newBuilder()
                        .setImage(pool.get(request.getName()).orElseThrow(() ->
                                CsiException.notFound("volume " + request.getName() + " does not exist on this node")))
                        .build();
            }
        });
    }

    @Override
    public void listImages(ListImagesRequest request, StreamObserver<ListImagesResponse> response) {
        Rpc.answer(response, () -> ListImagesResponse.newBuilder()
                .addAllImages(pool.list())
                .setPool(pool.status())
                .build());
    }

    private static String name(String name) {
        if (name.isEmpty()) {
            throw CsiException.missing("name");
        }
        VolumeId.checkName(name);
        return name;
    }
}
