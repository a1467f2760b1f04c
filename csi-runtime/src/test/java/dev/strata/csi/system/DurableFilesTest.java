package dev.strata.csi.system;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class DurableFilesTest {

    @TempDir
    Path dir;

    @Test
    void missingDirectoriesAreMadeAndAFileGoesIntoThem() throws Exception {
        Path nested = dir.resolve("pool/snapshots/more");

        DurableFiles.createDirectories(nested);
        DurableFiles.createDirectories(nested); // there already: nothing to do
        DurableFiles.write(nested.resolve("a.record"), "state: READY".getBytes(StandardCharsets.UTF_8));

        assertTrue(Files.isDirectory(nested));
        assertArrayEquals("state: READY".getBytes(StandardCharsets.UTF_8), Files.readAllBytes(nested.resolve("a.record")));
    }

    @Test
    void aFileWhereADirectoryBelongsIsAnError() throws Exception {
        Files.writeString(dir.resolve("snapshots"), "not a directory");

        assertThrows(FileAlreadyExistsException.class, () -> DurableFiles.createDirectories(dir.resolve("snapshots")));
        assertThrows(java.io.IOException.class, () -> DurableFiles.createDirectories(dir.resolve("snapshots/below")));
    }
}
