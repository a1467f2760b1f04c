package dev.strata.csi.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Status;
import java.io.IOException;
import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
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

    /** What a caller reads of a failure: the file and the system's reason, never a Java class name. */
    @Test
    void aFailureIsDescribedWithoutJavaText() throws Exception {
        Path dir = Files.createTempDirectory("describe");
        try {
            Path tooLong = dir.resolve("\u00fc".repeat(300));
            FileSystemException refused = assertThrows(FileSystemException.class, () -> Files.createDirectory(tooLong));
            assertEquals(CsiException.printable(tooLong.toString()) + ": File name too long", CsiException.describe(refused));
            NoSuchFileException missing = assertThrows(NoSuchFileException.class, () -> Files.delete(dir.resolve("gone\nline")));
            assertEquals(dir + "/gone\\x0aline: No such file or directory", CsiException.describe(missing));
            assertEquals("mkfs.ext4 said no", CsiException.describe(new IOException("mkfs.ext4 said no")));
            String none = CsiException.describe(new java.net.ConnectException());
            assertFalse(none.contains("Exception") || none.contains("java."), none);
        } finally {
            Files.deleteIfExists(dir);
        }
    }
}
