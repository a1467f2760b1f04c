package dev.strata.csi.log;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import dev.strata.csi.agent.api.ContentChunk;
import dev.strata.csi.agent.api.ContentData;
import dev.strata.csi.agent.api.NodeAgentGrpc;
import dev.strata.csi.agent.api.WriteContentRequest;
import dev.strata.csi.agent.api.WriteContentResponse;
import dev.strata.csi.server.Endpoint;
import dev.strata.csi.server.GrpcServer;
import io.grpc.ManagedChannel;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.shaded.io.netty.channel.MultiThreadIoEventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollDomainSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollIoHandler;
import io.grpc.netty.shaded.io.netty.channel.unix.DomainSocketAddress;
import io.grpc.stub.StreamObserver;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.Base64;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The call log at debug verbosity, on a real server and socket: what it writes of a streamed request. */
class CallLogTest {

    private static final int CHUNK = 64 * 1024;

    @TempDir
    Path dir;

    /** A copy's volume data never reaches the log: each chunk is logged with its offset and length. */
    @Test
    void aDebugLogOfAWriteContentStreamHoldsNoDataBytes() throws Exception {
        CompletableFuture<Integer> received = new CompletableFuture<>();
        NodeAgentGrpc.NodeAgentImplBase agent = new NodeAgentGrpc.NodeAgentImplBase() {
            @Override
            public StreamObserver<WriteContentRequest> writeContent(StreamObserver<WriteContentResponse> response) {
                return new StreamObserver<>() {
                    int chunks;

                    @Override
                    public void onNext(WriteContentRequest request) {
                        chunks++;
                    }

                    @Override
                    public void onError(Throwable t) {
                        received.completeExceptionally(t);
                    }

                    @Override
                    public void onCompleted() {
                        response.onNext(WriteContentResponse.newBuilder().setWrittenBytes(3L * CHUNK).build());
                        response.onCompleted();
                        received.complete(chunks);
                    }
                };
            }
        };
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        Log log = new Log(new PrintStream(out, true, StandardCharsets.UTF_8), 5);
        assertTrue(log.debugEnabled());
        GrpcServer server = GrpcServer.onUnixSocket(new Endpoint(dir.resolve("agent.sock")), List.of(agent), List.of(new CallLog(log)), log);
        MultiThreadIoEventLoopGroup loop = new MultiThreadIoEventLoopGroup(1, EpollIoHandler.newFactory());
        ManagedChannel channel = NettyChannelBuilder.forAddress(new DomainSocketAddress(dir.resolve("agent.sock").toFile()))
                .eventLoopGroup(loop).channelType(EpollDomainSocketChannel.class).usePlaintext().build();
        // Printable data, as a text file on a volume is: the easiest to find in a log, escaped or not.
        byte[] data = new byte[CHUNK];
        byte[] secret = "tenant-data-7f3a ".getBytes(StandardCharsets.US_ASCII);
        for (int i = 0; i < data.length; i++) {
            data[i] = secret[i % secret.length];
        }
        try {
            CompletableFuture<WriteContentResponse> answer = new CompletableFuture<>();
            StreamObserver<WriteContentRequest> stream = NodeAgentGrpc.newStub(channel).withDeadlineAfter(30, TimeUnit.SECONDS)
                    .writeContent(new StreamObserver<>() {
                        @Override
                        public void onNext(WriteContentResponse value) {
                            answer.complete(value);
                        }

                        @Override
                        public void onError(Throwable t) {
                            answer.completeExceptionally(t);
                        }

                        @Override
                        public void onCompleted() {
                        }
                    });
            for (int i = 0; i < 3; i++) {
                stream.onNext(WriteContentRequest.newBuilder().setName("pvc-copy").setChunk(ContentChunk.newBuilder()
                        .setData(ContentData.newBuilder().setOffset((long) i * CHUNK).setData(ByteString.copyFrom(data)))).build());
            }
            stream.onCompleted();
            assertEquals(3L * CHUNK, answer.get(30, TimeUnit.SECONDS).getWrittenBytes());
            assertEquals(3, received.get(30, TimeUnit.SECONDS));
        } finally {
            channel.shutdownNow();
            loop.shutdownGracefully(0, 1, TimeUnit.SECONDS);
            server.stop(Duration.ofSeconds(5));
        }
        String logged = out.toString(StandardCharsets.UTF_8);
        List<String> requests = logged.lines().filter(line -> line.contains("msg=request") && line.contains("WriteContent")).toList();
        assertEquals(3, requests.size(), "each message logged at debug verbosity: " + logged);
        for (int i = 0; i < 3; i++) {
            String line = requests.get(i);
            // Offset 0 is proto3's default, which the text form leaves out.
            assertTrue((i == 0 || line.contains("offset: " + (long) i * CHUNK)) && line.contains("[" + CHUNK + " bytes]"),
                    "the chunk's offset and length: " + line);
        }
        for (String form : List.of("tenant-data", HexFormat.of().formatHex(Arrays.copyOf(secret, 8)),
                Base64.getEncoder().encodeToString(Arrays.copyOf(data, 48)))) {
            assertFalse(logged.contains(form), "no data byte in the log, in any form (" + form + "): " + logged);
        }
    }
}
