package dev.strata.csi.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Status;
import org.junit.jupiter.api.Test;

class CsiExceptionTest {

    @Test
    void aMessageFitsTheStatusAsItIs() {
        Status status = CsiException.notFound("volume pvc-a does not exist").toStatus();

        assertEquals(Status.Code.NOT_FOUND, status.getCode());
        assertEquals("volume pvc-a does not exist", status.getDescription());
    }

    /** A message quoting oversized input keeps its code: the description is cut, and says by how much. */
    @Test
    void anOversizedMessageIsCutShort() {
        String quoted = "x".repeat(100_000);
        Status status = CsiException.alreadyExists("volume pvc-a exists from volume " + quoted).toStatus();

        assertEquals(Status.Code.ALREADY_EXISTS, status.getCode());
        assertTrue(status.getDescription().startsWith("volume pvc-a exists from volume xxx"), status.getDescription());
        assertTrue(status.getDescription().endsWith("... (" + (32 + 100_000 - CsiException.MAX_DESCRIPTION) + " more characters)"),
                status.getDescription().substring(CsiException.MAX_DESCRIPTION));
        assertTrue(status.getDescription().length() < CsiException.MAX_DESCRIPTION + 40);
    }
}
