package dev.strata.csi.node.mount;

import static dev.strata.csi.node.mount.MountFlags.MS_NODEV;
import static dev.strata.csi.node.mount.MountFlags.MS_NOEXEC;
import static dev.strata.csi.node.mount.MountFlags.MS_NOSUID;
import static dev.strata.csi.node.mount.MountFlags.MS_PRIVATE;
import static dev.strata.csi.node.mount.MountFlags.MS_RDONLY;
import static dev.strata.csi.node.mount.MountFlags.MS_REC;
import static dev.strata.csi.node.mount.MountFlags.MS_RELATIME;
import static dev.strata.csi.node.mount.MountFlags.MS_SHARED;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.strata.csi.mount.MountException;
import java.util.List;
import org.junit.jupiter.api.Test;

/** How mount options become mount(2)'s arguments; SystemMounterSystemTest holds them against mount(8). */
class MountFlagsTest {

    @Test
    void genericOptionsAreFlagsAndTheRestIsDataInOrder() throws MountException {
        assertEquals(new MountFlags(MS_RDONLY | MS_NOSUID | MS_NODEV, "noload,data=ordered", List.of()),
                MountFlags.of(List.of("ro", "noload", "nosuid", "data=ordered", "nodev")));
    }

    @Test
    void noOptionsAreNoFlagsAndNoData() throws MountException {
        assertEquals(new MountFlags(0, null, List.of()), MountFlags.of(List.of()));
    }

    @Test
    void aLaterOptionOverridesAnEarlierOne() throws MountException {
        assertEquals(0, MountFlags.of(List.of("ro", "rw")).flags());
        assertEquals(MS_RDONLY, MountFlags.of(List.of("rw", "ro")).flags());
        assertEquals(MS_NOSUID | MS_NODEV, MountFlags.of(List.of("user", "exec")).flags(), "user implies noexec, unless exec follows");
        assertEquals(MS_RELATIME, MountFlags.of(List.of("norelatime", "relatime")).flags());
    }

    @Test
    void optionsOnlyMountReadsNeverReachTheKernel() throws MountException {
        assertEquals(new MountFlags(MS_RDONLY, null, List.of()),
                MountFlags.of(List.of("ro", "defaults", "auto", "noauto", "nouser", "_netdev", "nofail", "comment=fstab", "x-systemd.automount")));
    }

    @Test
    void propagationIsSeparateCallsInOrder() throws MountException {
        assertEquals(new MountFlags(MS_NOEXEC, null, List.of(MS_PRIVATE, MS_SHARED | MS_REC)),
                MountFlags.of(List.of("private", "noexec", "rshared")));
    }

    @Test
    void optionsAreCheckedFirst() {
        assertThrows(MountException.class, () -> MountFlags.of(List.of("bind")));
        assertThrows(MountException.class, () -> MountFlags.of(List.of("ro,suid")));
        assertThrows(MountException.class, () -> MountFlags.of(List.of("x-mount.mkdir")));
    }
}
