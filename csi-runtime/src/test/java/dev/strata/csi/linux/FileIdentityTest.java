package dev.strata.csi.linux;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class FileIdentityTest {

    @TempDir
    Path dir;

    private final Kernel kernel = new Kernel();

    @Test
    void aDescriptorAndThePathOfItsFileGiveOneIdentity() throws Exception {
        Path file = Files.writeString(dir.resolve("a"), "a");
        try (FileDescriptor fd = kernel.open(file.toString(), Kernel.O_RDONLY)) {
            assertEquals(FileIdentity.of(file), kernel.identity(fd));
        }
    }

    @Test
    void aFileRemovedWhileOpenKeepsItsIdentityApartFromANewOneAtItsPath() throws Exception {
        Path file = Files.writeString(dir.resolve("a"), "a");
        try (FileDescriptor removed = kernel.open(file.toString(), Kernel.O_RDONLY)) {
            FileIdentity before = kernel.identity(removed);
            Files.delete(file);
            Files.writeString(file, "b");
            assertEquals(before, kernel.identity(removed), "still the removed file's");
            assertNotEquals(before, FileIdentity.of(file), "the new file at the path is another");
        }
    }
}
