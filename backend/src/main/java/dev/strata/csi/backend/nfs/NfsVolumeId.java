package dev.strata.csi.backend.nfs;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.Optional;

/**
 * The id of an NFS volume the driver provisioned: {@code nfs/<server>/<share>/<subDir>/<onDelete>},
 * share and subDir percent-encoded so that their '/' cannot be confused with the separators. The id
 * holds all a controller needs to act on the volume, so any replica can, with no state of its own.
 *
 * <p>Only the canonical encoding parses (unreserved characters plain, everything else as upper-case
 * {@code %XX}), so one volume has exactly one id.
 */
public record NfsVolumeId(NfsVolume volume, OnDelete onDelete) {

    private static final String PREFIX = "nfs";
    private static final HexFormat HEX = HexFormat.of().withUpperCase();

    @Override
    public String toString() {
        return String.join("/", PREFIX, volume.server(), encode(volume.share()), encode(volume.subDir()), onDelete.value());
    }

    /** The id parsed, or empty for a string that is not an NFS volume id of this driver. */
    public static Optional<NfsVolumeId> parse(String id) {
        String[] parts = id.split("/", -1);
        if (parts.length != 5 || !parts[0].equals(PREFIX)) {
            return Optional.empty();
        }
        try {
            String share = decode(parts[2]);
            String subDir = decode(parts[3]);
            NfsVolumeId parsed = new NfsVolumeId(new NfsVolume(parts[1], share, subDir), OnDelete.of(parts[4]));
            return parsed.toString().equals(id) ? Optional.of(parsed) : Optional.empty();
        } catch (RuntimeException e) { // a bad escape, a path that leaves the share, an unknown mode
            return Optional.empty();
        }
    }

    /** Percent-encodes all but the unreserved characters (RFC 3986), upper-case: the one canonical form. */
    static String encode(String text) {
        StringBuilder out = new StringBuilder();
        for (byte b : text.getBytes(StandardCharsets.UTF_8)) {
            if (unreserved(b)) {
                out.append((char) b);
            } else {
                out.append('%').append(HEX.toHexDigits(b));
            }
        }
        return out.toString();
    }

    /** The inverse of {@link #encode}; IllegalArgumentException for a bad escape. */
    static String decode(String text) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c == '%') {
                out.write(HexFormat.fromHexDigits(text, i + 1, i + 3));
                i += 2;
            } else {
                out.write(c);
            }
        }
        return out.toString(StandardCharsets.UTF_8);
    }

    private static boolean unreserved(byte b) {
        return (b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z') || (b >= '0' && b <= '9') || b == '-' || b == '.' || b == '_' || b == '~';
    }
}
