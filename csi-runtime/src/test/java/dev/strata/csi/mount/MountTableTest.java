package dev.strata.csi.mount;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;

class MountTableTest {

    private static final String MOUNTINFO = """
            22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard
            23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
            40 22 7:3 / /var/lib/kubelet/plugins/strata/staging/pv\\0401 rw,noatime shared:30 master:2 - ext4 /dev/loop3 rw
            41 22 7:3 / /var/lib/kubelet/pods/a\\011b/volumes/pv1 ro,relatime shared:30 - ext4 /dev/loop3 rw
            42 22 0:50 / /mnt/stack rw,relatime - tmpfs lower rw,size=1024k
            43 42 0:51 / /mnt/stack rw,relatime - tmpfs upper rw,size=2048k
            44 22 0:52 /sub/dir /mnt/back\\134slash\\012newline rw - tmpfs  rw
            45 22 0:53 / /mnt/stackbis rw - tmpfs other rw
            """;

    private final MountTable table = MountTable.parse(MOUNTINFO);

    @Test
    void readsEveryFieldOfALine() {
        MountPoint root = table.all().getFirst();
        assertEquals(new MountPoint(22, 1, new DeviceNumber(254, 0), "/", Path.of("/"), List.of("rw", "relatime"),
                "ext4", "/dev/vda", List.of("rw", "discard")), root);
        assertEquals(8, table.all().size());
    }

    @Test
    void decodesOctalEscapesInPathsAndSources() {
        assertTrue(table.isMountPoint(Path.of("/var/lib/kubelet/plugins/strata/staging/pv 1")));
        assertTrue(table.isMountPoint(Path.of("/var/lib/kubelet/pods/a\tb/volumes/pv1")));
        MountPoint odd = table.at(Path.of("/mnt/back\\slash\nnewline")).orElseThrow();
        assertEquals("/sub/dir", odd.root());
        assertEquals("", odd.source(), "an empty source field is kept empty");
    }

    @Test
    void optionalFieldsOfAnyNumberAreSkipped() {
        MountPoint staged = table.at(Path.of("/var/lib/kubelet/plugins/strata/staging/pv 1")).orElseThrow();
        assertEquals("ext4", staged.fsType());
        assertEquals("/dev/loop3", staged.source());
        assertEquals(List.of("rw"), staged.superOptions());
    }

    @Test
    void stackedMountsAnswerWithTheOneOnTop() {
        assertEquals("upper", table.at(Path.of("/mnt/stack")).orElseThrow().source());
        String listedTheOtherWayRound = """
                43 42 0:51 / /mnt/stack rw - tmpfs upper rw
                42 22 0:50 / /mnt/stack rw - tmpfs lower rw
                """;
        assertEquals("upper", MountTable.parse(listedTheOtherWayRound).at(Path.of("/mnt/stack")).orElseThrow().source());
    }

    @Test
    void targetsAreComparedAsNormalizedPaths() {
        assertTrue(table.isMountPoint(Path.of("/mnt/stack/")));
        assertTrue(table.isMountPoint(Path.of("/mnt/other/../stack")));
        assertFalse(table.isMountPoint(Path.of("/mnt")));
        assertFalse(table.isMountPoint(Path.of("/mnt/stack/inside")));
        assertEquals(Optional.empty(), table.at(Path.of("/nowhere")));
    }

    @Test
    void readOnlyIsThePerMountFlag() {
        assertTrue(table.at(Path.of("/var/lib/kubelet/pods/a\tb/volumes/pv1")).orElseThrow().readOnly());
        assertFalse(table.at(Path.of("/var/lib/kubelet/plugins/strata/staging/pv 1")).orElseThrow().readOnly());
    }

    @Test
    void underMeansAtOrBelowByWholePathComponents() {
        assertEquals(List.of(42, 43), table.under(Path.of("/mnt/stack")).stream().map(MountPoint::id).toList());
        assertEquals(List.of(42, 43, 44, 45), table.under(Path.of("/mnt")).stream().map(MountPoint::id).toList());
        assertEquals(List.of(40, 41), table.under(Path.of("/var/lib/kubelet")).stream().map(MountPoint::id).toList());
    }

    @Test
    void aMalformedLineIsAnError() {
        assertThrows(IllegalArgumentException.class, () -> MountTable.parse("22 1 254:0 / / rw shared:1 ext4 /dev/vda rw"));
        assertThrows(IllegalArgumentException.class, () -> MountTable.parse("x 1 254:0 / / rw - ext4 /dev/vda rw"));
        assertThrows(IllegalArgumentException.class, () -> MountTable.parse("22 1 254 / / rw - ext4 /dev/vda rw"));
    }

    @Test
    void anUnfinishedEscapeIsKeptAsWritten() {
        MountTable odd = MountTable.parse("50 22 0:60 / /mnt/a\\04 rw - tmpfs x\\9 rw");
        assertTrue(odd.isMountPoint(Path.of("/mnt/a\\04")));
        assertEquals("x\\9", odd.all().getFirst().source());
    }

    @Test
    void readsTheLiveTable() throws MountException {
        MountTable live = MountTable.read();
        assertTrue(live.isMountPoint(Path.of("/")));
        assertEquals("proc", live.at(Path.of("/proc")).orElseThrow().fsType());
    }

    @Test
    void deviceNumbersReadAndPrintAsMajorColonMinor() {
        assertEquals(new DeviceNumber(7, 12), DeviceNumber.parse("7:12\n"));
        assertEquals("259:1", new DeviceNumber(259, 1).toString());
        assertThrows(IllegalArgumentException.class, () -> DeviceNumber.parse("7"));
        assertThrows(IllegalArgumentException.class, () -> DeviceNumber.parse("7:x"));
    }
}
