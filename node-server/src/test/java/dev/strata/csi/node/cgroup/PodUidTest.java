package dev.strata.csi.node.cgroup;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.file.Path;
import java.util.Optional;
import org.junit.jupiter.api.Test;

class PodUidTest {

    static final Path KUBELET = Path.of("/var/lib/kubelet");
    static final String UID = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";

    @Test
    void theUidOfAFilesystemVolumesTargetPath() {
        assertEquals(Optional.of(new PodUid(UID)), PodUid.ofTargetPath(KUBELET,
                KUBELET.resolve("pods/" + UID + "/volumes/kubernetes.io~csi/pvc-1/mount")));
    }

    @Test
    void theUidOfABlockVolumesTargetPath() {
        assertEquals(Optional.of(new PodUid(UID)), PodUid.ofTargetPath(KUBELET,
                KUBELET.resolve("plugins/kubernetes.io/csi/volumeDevices/publish/pvc-1/" + UID)));
    }

    @Test
    void noUidInAnyOtherPath() {
        for (String other : new String[] {
                "plugins/kubernetes.io/csi/strata.csi.dev/0123abcd/globalmount", // a staging path
                "pods/" + UID + "/volumes/kubernetes.io~csi/pvc-1", // not the mount below it
                "pods/" + UID + "/volumes/kubernetes.io~empty-dir/x/mount",
                "pods/../volumes/kubernetes.io~csi/pvc-1/mount", // no UID walks up
                "pods/" + UID + "x/volumes/kubernetes.io~csi/pvc-1/mount", // not a UID's characters
                "plugins/kubernetes.io/csi/volumeDevices/staging/pvc-1/" + UID}) {
            assertEquals(Optional.empty(), PodUid.ofTargetPath(KUBELET, KUBELET.resolve(other)), other);
        }
        assertEquals(Optional.empty(), PodUid.ofTargetPath(KUBELET,
                Path.of("/elsewhere/pods/" + UID + "/volumes/kubernetes.io~csi/pvc-1/mount")));
    }

    @Test
    void systemdWritesTheUidWithUnderscores() {
        assertEquals("0f1e2d3c_4b5a_6978_8796_a5b4c3d2e1f0", new PodUid(UID).systemdForm());
        assertThrows(IllegalArgumentException.class, () -> new PodUid("../kubepods"));
    }
}
