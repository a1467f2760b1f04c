package dev.strata.csi.node.cgroup;

import java.nio.file.Path;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * A pod's UID, as kubelet names the pod's directories and cgroups: a UUID, or for a static pod
 * the hex digest kubelet makes up. Only those characters are taken, so a UID never walks out of
 * the cgroup hierarchy.
 */
public record PodUid(String value) {

    private static final Pattern FORM = Pattern.compile("[0-9a-fA-F-]{1,64}");

    public PodUid {
        if (!FORM.matcher(value).matches()) {
            throw new IllegalArgumentException("not a pod UID: " + value);
        }
    }

    /**
     * The pod a target path of kubelet's is for: {@code <kubelet>/pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount}
     * (a filesystem volume), {@code <kubelet>/plugins/kubernetes.io/csi/volumeDevices/publish/<pv>/<uid>}
     * (a raw block volume). Empty for any other path: a staging path, or one kubelet did not make.
     */
    public static Optional<PodUid> ofTargetPath(Path kubeletDir, Path target) {
        if (!target.startsWith(kubeletDir)) {
            return Optional.empty();
        }
        Path relative = kubeletDir.relativize(target);
        int n = relative.getNameCount();
        String uid;
        if (n == 6 && name(relative, 0).equals("pods") && name(relative, 2).equals("volumes")
                && name(relative, 3).equals("kubernetes.io~csi") && name(relative, 5).equals("mount")) {
            uid = name(relative, 1);
        } else if (n == 7 && relative.subpath(0, 5).equals(Path.of("plugins/kubernetes.io/csi/volumeDevices/publish"))) {
            uid = name(relative, 6);
        } else {
            return Optional.empty();
        }
        return FORM.matcher(uid).matches() ? Optional.of(new PodUid(uid)) : Optional.empty();
    }

    private static String name(Path path, int index) {
        return path.getName(index).toString();
    }

    /** The UID as the systemd cgroup driver writes it in a slice's name: '-' separates a slice's parents there. */
    String systemdForm() {
        return value.replace('-', '_');
    }

    @Override
    public String toString() {
        return value;
    }
}
