package dev.strata.csi.testing;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.List;

/** A directory laid out as kubelet lays out a Secret volume, updated as kubelet updates it. */
public final class SecretVolume {

    private SecretVolume() {}

    /**
     * Writes {@code files} of {@code from} into {@code secret}: a new directory {@code version},
     * then the {@code ..data} link swapped to it in one rename; each file is a link through {@code ..data}.
     */
    public static void publish(Path secret, Path from, String version, List<String> files) throws IOException {
        Files.createDirectories(secret);
        Path target = Files.createDirectories(secret.resolve(version));
        for (String name : files) {
            Files.copy(from.resolve(name), target.resolve(name));
            Path link = secret.resolve(name);
            if (!Files.isSymbolicLink(link)) {
                Files.createSymbolicLink(link, Path.of("..data", name));
            }
        }
        Path next = secret.resolve("..data_tmp");
        Files.createSymbolicLink(next, Path.of(version));
        Files.move(next, secret.resolve("..data"), StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    }
}
