package dev.strata.csi.conformance;

import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.Message;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ForwardingClientCall;
import io.grpc.MethodDescriptor;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.util.Optional;
import java.util.Set;
import java.util.function.Function;

/**
 * Rewrites the kubelet paths of Node requests from this machine's view to the node container's:
 * the suite plays kubelet on a node whose filesystem is a directory of the test, so its
 * /var/lib/kubelet is below that directory, where a real kubelet's is the same path the node
 * plugin sees. Nothing else of a request changes.
 */
final class ContainerPaths implements ClientInterceptor {

    /** The CSI fields that carry a path of kubelet's: staging and target paths, and NodeGetVolumeStats' and NodeExpandVolume's. */
    private static final Set<String> PATH_FIELDS = Set.of("staging_target_path", "target_path", "volume_path");

    private final Function<Path, Optional<String>> inContainer;

    ContainerPaths(Function<Path, Optional<String>> inContainer) {
        this.inContainer = inContainer;
    }

    @Override
    public <Q, A> ClientCall<Q, A> interceptCall(MethodDescriptor<Q, A> method, CallOptions options, Channel next) {
        return new ForwardingClientCall.SimpleForwardingClientCall<>(next.newCall(method, options)) {
            @Override
            @SuppressWarnings("unchecked")
            public void sendMessage(Q message) {
                super.sendMessage(message instanceof Message request ? (Q) rewrite(request) : message);
            }
        };
    }

    private Message rewrite(Message request) {
        Message.Builder builder = request.toBuilder();
        for (FieldDescriptor field : request.getDescriptorForType().getFields()) {
            if (PATH_FIELDS.contains(field.getName()) && field.getJavaType() == FieldDescriptor.JavaType.STRING) {
                String value = (String) request.getField(field);
                try {
                    if (value.startsWith("/")) {
                        inContainer.apply(Path.of(value)).ifPresent(path -> builder.setField(field, path));
                    }
                } catch (InvalidPathException e) {
                    // not a path of this machine's either (a test of bad input): sent as it is
                }
            }
        }
        return builder.build();
    }
}
