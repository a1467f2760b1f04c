package dev.strata.csi.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import csi.v1.Csi.ControllerPublishVolumeRequest;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.NodeStageVolumeRequest;
import csi.v1.Csi.VolumeCapability;
import dev.strata.csi.node.NodeServer;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.ServerProcess;
import dev.strata.csi.testing.SystemState;
import io.grpc.StatusRuntimeException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * --log-format json on both servers, run as processes: every line either writes, on stdout and
 * stderr, from start to stop, through failing calls and a crash, is one JSON object with time,
 * level and msg; call lines carry their fields; secrets (the requests' and the agent token)
 * never appear, even at --v=5.
 */
@Tag("root")
class JsonLogTest {

    static final String SECRET = "hunter2-never-logged";

    @TempDir
    Path dir;

    @AfterEach
    void nothingLeftBehind() throws Exception {
        assertEquals(List.of(), SystemState.cleanUp(dir), "the test left mounts or loop devices behind");
    }

    @Test
    void everyLineOfBothServersIsAJsonObjectAndNoSecretIsLogged() throws Exception {
        Root.require();
        List<String> controllerLines;
        List<String> nodeLines;
        List<String> crashedNodeLines;
        // --v=5 logs request bodies too, where secrets would show if they were not removed.
        try (Cluster cluster = Cluster.start(dir, List.of("--agent-plaintext", "--log-format=json", "--v", "5"), "node-a")) {
            VolumeCapability capability = PipelineTest.mount("ext4");
            String volumeId = cluster.controller().createVolume(CreateVolumeRequest.newBuilder().setName("pvc-json")
                    .setCapacityRange(csi.v1.Csi.CapacityRange.newBuilder().setRequiredBytes(16L << 20))
                    .addVolumeCapabilities(capability).putSecrets("password", SECRET).build()).getVolume().getVolumeId();
            assertThrows(StatusRuntimeException.class, () -> cluster.controller().createVolume(CreateVolumeRequest.newBuilder()
                    .addVolumeCapabilities(capability).putSecrets("password", SECRET).build()));
            assertThrows(StatusRuntimeException.class, () -> cluster.controller().controllerPublishVolume(
                    ControllerPublishVolumeRequest.newBuilder().setVolumeId(volumeId).setNodeId("node-x")
                            .setVolumeCapability(capability).putSecrets("password", SECRET).build()));
            assertThrows(StatusRuntimeException.class, () -> cluster.node("node-a").node().nodeStageVolume(
                    NodeStageVolumeRequest.newBuilder().setVolumeId("local/node-a/pvc-none")
                            .setStagingTargetPath(cluster.kubeletDir("node-a", "staging").toString())
                            .setVolumeCapability(capability).putSecrets("password", SECRET).build()));
            cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(volumeId).putSecrets("password", SECRET).build());

            // SIGTERM: the lines of an orderly stop count too.
            ServerProcess node = cluster.node("node-a").process();
            node.terminate();
            node.exitCode();
            nodeLines = node.output().lines().toList();

            // A test crash point prints on System.err and halts: that line must come out as JSON too.
            ServerProcess crashed = cluster.startNode("node-a", Cluster.Launch.HOST.with("STRATA_TEST_CRASH_AT", "CREATE_RECORDED"))
                    .process();
            assertThrows(StatusRuntimeException.class, () -> cluster.controller().createVolume(CreateVolumeRequest.newBuilder()
                    .setName("pvc-crash").setCapacityRange(csi.v1.Csi.CapacityRange.newBuilder().setRequiredBytes(16L << 20))
                    .addVolumeCapabilities(capability).build()));
            crashed.exitCode();
            crashedNodeLines = crashed.output().lines().toList();

            ServerProcess controller = cluster.controllerProcess();
            controller.terminate();
            controller.exitCode();
            controllerLines = controller.output().lines().toList();
        }

        List<JsonObject> controller = parseAll("controller-server", controllerLines);
        List<JsonObject> node = parseAll("node-server", nodeLines);
        List<JsonObject> crashed = parseAll("node-server (crashed)", crashedNodeLines);

        JsonObject created = call(controller, "csi.v1.Controller/CreateVolume", "OK");
        assertEquals("pvc-json", created.get("name").getAsString());
        assertEquals("INFO", created.get("level").getAsString());
        Double.parseDouble(created.get("duration_ms").getAsString());
        JsonObject refused = call(controller, "csi.v1.Controller/CreateVolume", "INVALID_ARGUMENT");
        assertEquals("WARN", refused.get("level").getAsString());
        assertTrue(refused.get("error").getAsString().contains("name"), refused.toString());
        assertEquals("local/node-a/pvc-none", call(node, "csi.v1.Node/NodeStageVolume", "NOT_FOUND").get("volume_id").getAsString());
        assertTrue(controller.stream().anyMatch(line -> line.get("msg").getAsString().equals("request")
                && line.get("request").getAsString().contains("pvc-json")), "request bodies are logged at --v=5");
        assertTrue(node.stream().anyMatch(line -> line.get("msg").getAsString().startsWith("stopping")), "the stop is logged");
        assertTrue(crashed.stream().anyMatch(line -> line.get("msg").getAsString().equals("crash point CREATE_RECORDED reached: halting")
                && line.get("stream").getAsString().equals("stderr")), String.join("\n", crashedNodeLines));

        for (List<String> lines : List.of(controllerLines, nodeLines, crashedNodeLines)) {
            assertFalse(String.join("\n", lines).contains(SECRET), "a CSI secret reached the log");
            assertFalse(String.join("\n", lines).contains(Cluster.TOKEN), "the agent token reached the log");
        }
    }

    @Test
    void aBadCommandLineIsReportedAsJsonToo() throws Exception {
        try (ServerProcess server = ServerProcess.start(NodeServer.class, Map.of("LOG_FORMAT", "json"),
                "--endpoint", "unix://" + dir.resolve("csi.sock"), "--no-such-flag")) {
            assertEquals(2, server.exitCode(), server.output());
            List<JsonObject> lines = parseAll("node-server", server.output().lines().toList());
            assertEquals(1, lines.size(), server.output());
            assertEquals("ERROR", lines.getFirst().get("level").getAsString());
            assertTrue(lines.getFirst().get("msg").getAsString().contains("no-such-flag"), server.output());
        }
    }

    /** Every line as a JSON object with string time, level and msg; fails naming the first that is not. */
    private static List<JsonObject> parseAll(String program, List<String> lines) {
        assertFalse(lines.isEmpty(), program + " wrote nothing");
        List<JsonObject> objects = new ArrayList<>();
        for (String line : lines) {
            JsonElement element;
            try {
                element = JsonParser.parseString(line);
            } catch (RuntimeException e) {
                throw new AssertionError(program + " wrote a line that is not JSON: " + line, e);
            }
            assertTrue(element.isJsonObject(), program + ": not a JSON object: " + line);
            JsonObject object = element.getAsJsonObject();
            for (String key : List.of("time", "level", "msg")) {
                assertTrue(object.has(key) && object.get(key).isJsonPrimitive(), program + ": no " + key + " in " + line);
            }
            java.time.Instant.parse(object.get("time").getAsString());
            assertTrue(List.of("DEBUG", "INFO", "WARN", "ERROR").contains(object.get("level").getAsString()), line);
            objects.add(object);
        }
        return objects;
    }

    private static JsonObject call(List<JsonObject> lines, String method, String code) {
        return lines.stream()
                .filter(line -> line.get("msg").getAsString().equals("call") && line.has("method") && line.has("code")
                        && line.get("method").getAsString().equals(method) && line.get("code").getAsString().equals(code))
                .findFirst().orElseThrow(() -> new AssertionError("no call line of " + method + " with " + code + " in " + lines));
    }
}
