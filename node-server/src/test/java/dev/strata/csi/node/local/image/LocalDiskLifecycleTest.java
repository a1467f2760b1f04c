package dev.strata.csi.node.local.image;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.linux.Kernel;
import dev.strata.csi.mount.MountPoint;
import dev.strata.csi.node.local.fs.Filesystems;
import dev.strata.csi.node.local.fs.SystemFilesystems;
import dev.strata.csi.node.mount.Df;
import dev.strata.csi.node.mount.FilesystemUsage;
import dev.strata.csi.node.mount.MountHelpers;
import dev.strata.csi.node.mount.Mounter;
import dev.strata.csi.node.mount.SystemFilesystemStats;
import dev.strata.csi.node.mount.SystemMounter;
import dev.strata.csi.system.Command;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A local-disk volume's way through the system layer and back, with the real kernel and tools:
 * image file, loop device, filesystem, staging mount, read-only publish, teardown. Needs root.
 */
@Tag("root")
class LocalDiskLifecycleTest {

    @TempDir
    Path dir;

    private final LoopDevices loops = new SystemLoopDevices(new Kernel());
    private final Filesystems filesystems = new SystemFilesystems(new Command());
    private final Mounter mounter = new SystemMounter(new Kernel(), new Command(), MountHelpers.none());

    @BeforeEach
    void root() {
        Root.require();
    }

    @AfterEach
    void cleanUp() throws Exception {
        SystemState.cleanUp(dir);
    }

    @ParameterizedTest
    @ValueSource(strings = {"ext4", "xfs", "btrfs"})
    void imageToPublishedVolumeAndBack(String fsType) throws Exception {
        Path image = Images.sparse(dir.resolve("pv.img"));
        LoopDevice loop = loops.attach(image);
        assertEquals(Images.SIZE, loops.sizeBytes(loop.device()));
        assertEquals(Optional.empty(), filesystems.probe(loop.device()), "a new image is blank");

        assertEquals(Optional.empty(), filesystems.formatIfBlank(loop.device(), fsType), "blank: formatted");
        assertEquals(Optional.of(fsType), filesystems.probe(loop.device()));
        String other = fsType.equals("ext4") ? "xfs" : "ext4";
        assertEquals(Optional.of(fsType), filesystems.formatIfBlank(loop.device(), other), "holds data: left alone");
        assertEquals(Optional.of(fsType), filesystems.probe(loop.device()), "the filesystem is untouched");

        Path staging = Files.createDirectory(dir.resolve("staging pv"));
        mounter.mount(loop.device().toString(), staging, fsType, List.of("noatime"));
        MountPoint staged = mounter.table().at(staging).orElseThrow();
        assertEquals(loop.device().toString(), staged.source());
        assertEquals(fsType, staged.fsType());
        assertTrue(staged.options().contains("noatime"), staged.toString());
        if (fsType.equals("btrfs")) {
            // btrfs gives each mounted filesystem an anonymous device number of its own.
            assertEquals(0, staged.device().major(), staged.toString());
        } else {
            assertEquals(loop.number(), staged.device());
            assertEquals(List.of(staged), mounter.table().all().stream().filter(loop::backs).toList());
        }
        Files.writeString(staging.resolve("data"), "written on " + fsType);
        FilesystemUsage usage = Df.assertAgrees(new SystemFilesystemStats(), staging);
        assertTrue(usage.totalBytes() > 0 && usage.totalBytes() <= Images.SIZE, usage.toString());

        Path published = Files.createDirectory(dir.resolve("published"));
        mounter.bindMount(staging, published, true);
        assertTrue(mounter.table().at(published).orElseThrow().readOnly());
        assertEquals("written on " + fsType, Files.readString(published.resolve("data")));
        FileSystemException readOnly = assertThrows(FileSystemException.class,
                () -> Files.writeString(published.resolve("data"), "changed"));
        assertEquals("Read-only file system", readOnly.getReason());

        mounter.unmount(published);
        mounter.unmount(staging);
        mounter.unmount(staging);
        assertEquals(List.of(), mounter.table().under(dir.toRealPath()));
        loops.detach(loop.device());
        loops.detach(loop.device());
        assertFalse(loops.list().stream().anyMatch(d -> d.backingFile().equals(loop.backingFile())));
        assertEquals(Optional.empty(), loops.find(image));
    }
}
