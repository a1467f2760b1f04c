package dev.strata.csi.controller.agents;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.auth.Caller;
import dev.strata.csi.log.Log;
import dev.strata.csi.rpc.CsiException;
import io.grpc.Status;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/** Which node a verified caller may register as (issue 40, item 3). */
class NodeIdentitiesTest {

    static final String NODE_ACCOUNT = "system:serviceaccount:strata-system:strata-node";

    final ByteArrayOutputStream logged = new ByteArrayOutputStream();
    final Log log = new Log(new PrintStream(logged, true, StandardCharsets.UTF_8), 0);

    static Optional<Caller> caller(Optional<String> node, String pod, Instant issued) {
        return Optional.of(new Caller(NODE_ACCOUNT, node, Optional.of(pod), issued));
    }

    static Status.Code refusal(Runnable registration) {
        return assertThrows(CsiException.class, registration::run).code();
    }

    @Test
    void aNodeRegistersAsTheNodeItsTokenNamesOnly() {
        NodeIdentities identities = new NodeIdentities(false, log);
        Instant now = Instant.now();
        assertDoesNotThrow(() -> identities.requireMayRegister("node-a", caller(Optional.of("node-a"), "pod-a1", now)));
        assertEquals(Status.Code.PERMISSION_DENIED,
                refusal(() -> identities.requireMayRegister("node-b", caller(Optional.of("node-a"), "pod-a1", now))));
        assertEquals(Status.Code.UNAUTHENTICATED, refusal(() -> identities.requireMayRegister("node-a",
                caller(Optional.of("node-a"), "pod-a0", now.minusSeconds(600)))), "an earlier pod's token, after a newer one registered");
    }

    @Test
    void aTokenWithoutNodeClaimIsRefusedUnlessTheOperatorTookTheRisk() {
        Optional<Caller> unbound = caller(Optional.empty(), "pod-o1", Instant.now());
        NodeIdentities strict = new NodeIdentities(false, log);
        assertEquals(Status.Code.PERMISSION_DENIED, refusal(() -> strict.requireMayRegister("node-old", unbound)));
        assertEquals(Status.Code.PERMISSION_DENIED, refusal(() -> strict.requireMayRegister("node-old", unbound)));
        String said = logged.toString(StandardCharsets.UTF_8);
        assertTrue(said.contains("--allow-unbound-node-identity"), said);
        assertEquals(1, said.lines().filter(line -> line.contains("refused a registration")).count(), "said once per node: " + said);

        NodeIdentities allowing = new NodeIdentities(true, log);
        assertDoesNotThrow(() -> allowing.requireMayRegister("node-old", unbound));
        assertDoesNotThrow(() -> allowing.requireMayRegister("any-node", unbound), "the node's word: the risk the flag names");
    }

    @Test
    void withoutIdentitiesTheSharedTokenWasTheCheck() {
        assertDoesNotThrow(() -> new NodeIdentities(false, log).requireMayRegister("node-a", Optional.empty()));
    }
}
