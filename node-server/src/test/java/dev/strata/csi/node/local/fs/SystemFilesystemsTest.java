package dev.strata.csi.node.local.fs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.system.CommandResult;
import dev.strata.csi.testing.FakeCommands;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/** How SystemFilesystems reads blkid and drives mkfs; LocalDiskLifecycleTest formats for real. */
class SystemFilesystemsTest {

    private static final Path DEVICE = Path.of("/dev/loop3");
    private static final List<String> BLKID = List.of("blkid", "-p", "-o", "export", "--", "/dev/loop3");

    private static FakeCommands blkidSays(int exitCode, String stdout) {
        return new FakeCommands(argv -> argv.getFirst().equals("blkid")
                ? new CommandResult(exitCode, stdout, exitCode > 2 ? "blkid: error" : "")
                : new CommandResult(0, "", ""));
    }

    @Test
    void nothingFoundIsBlank() throws DeviceException {
        FakeCommands commands = blkidSays(2, "");
        assertEquals(Optional.empty(), new SystemFilesystems(commands).probe(DEVICE));
        assertEquals(List.of(BLKID), commands.calls());
    }

    @Test
    void aFilesystemIsNamedByItsType() throws DeviceException {
        String ext4 = "DEVNAME=/dev/loop3\nUUID=5d1e\nBLOCK_SIZE=4096\nTYPE=ext4\nUSAGE=filesystem\n";
        assertEquals(Optional.of("ext4"), new SystemFilesystems(blkidSays(0, ext4)).probe(DEVICE));
    }

    @Test
    void aPartitionTableCountsAsData() throws DeviceException {
        String gpt = "DEVNAME=/dev/loop3\nPTUUID=1b2c\nPTTYPE=gpt\n";
        assertEquals(Optional.of("gpt"), new SystemFilesystems(blkidSays(0, gpt)).probe(DEVICE));
    }

    @Test
    void aSignatureWithoutATypeNameIsStillNotBlank() throws DeviceException {
        assertEquals(Optional.of("unknown"), new SystemFilesystems(blkidSays(0, "DEVNAME=/dev/loop3\nUSAGE=other\n")).probe(DEVICE));
    }

    @Test
    void anyOtherBlkidFailureIsAnError() {
        // 8: several signatures, none sure; 4: bad usage or I/O error
        DeviceException e = assertThrows(DeviceException.class, () -> new SystemFilesystems(blkidSays(8, "")).probe(DEVICE));
        assertEquals("blkid -p /dev/loop3: exit 8: blkid: error", e.getMessage());
    }

    @Test
    void formatsABlankDeviceWithTheToolForItsType() throws DeviceException {
        for (var expected : List.of(
                List.of("mkfs.ext4", "-q", "-m", "0", "-E", "nodiscard,lazy_itable_init=1,lazy_journal_init=1", "/dev/loop3"),
                List.of("mkfs.xfs", "-q", "-K", "/dev/loop3"),
                List.of("mkfs.btrfs", "-q", "-K", "/dev/loop3"))) {
            FakeCommands commands = blkidSays(2, "");
            String fsType = expected.getFirst().substring("mkfs.".length());
            assertEquals(Optional.empty(), new SystemFilesystems(commands).formatIfBlank(DEVICE, fsType));
            assertEquals(List.of(BLKID, expected), commands.calls());
        }
    }

    @Test
    void neverFormatsADeviceThatHoldsSomething() throws DeviceException {
        FakeCommands commands = blkidSays(0, "TYPE=xfs\n");
        assertEquals(Optional.of("xfs"), new SystemFilesystems(commands).formatIfBlank(DEVICE, "ext4"));
        assertEquals(List.of(BLKID), commands.calls(), "no mkfs ran");
    }

    @Test
    void neverFormatsWhenTheProbeFails() {
        FakeCommands commands = blkidSays(4, "");
        assertThrows(DeviceException.class, () -> new SystemFilesystems(commands).formatIfBlank(DEVICE, "ext4"));
        assertEquals(List.of(BLKID), commands.calls());
    }

    @Test
    void otherTypesAreRefusedBeforeAnythingRuns() {
        FakeCommands commands = blkidSays(2, "");
        UnsupportedFilesystemException e = assertThrows(UnsupportedFilesystemException.class,
                () -> new SystemFilesystems(commands).formatIfBlank(DEVICE, "ntfs"));
        assertEquals("cannot create filesystem type \"ntfs\"; supported: btrfs, ext4, xfs", e.getMessage());
        assertEquals(List.of(), commands.calls());
    }
}
