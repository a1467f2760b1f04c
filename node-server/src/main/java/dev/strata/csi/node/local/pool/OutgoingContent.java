package dev.strata.csi.node.local.pool;

import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.image.ImageContent;
import java.io.IOException;

/**
 * A volume's or a snapshot's content as a copy to another node reads it ({@link ImageContent}),
 * what its record says it holds, and a tag that names this content: another tag when it may
 * have changed, so that a transfer cut short never resumes on other content.
 */
public final class OutgoingContent implements AutoCloseable {

    /** Reads the content from its start; the chunks from {@code from} on go to {@code chunks}; returns the digest. */
    @FunctionalInterface
    interface Reader {
        byte[] read(long from, ImageContent.Chunks chunks) throws IOException, InterruptedException;
    }

    private final String tag;
    private final long sizeBytes;
    private final String filesystem;
    private final boolean usedAsBlock;
    private final boolean encrypted;
    private final Reader reader;
    private final IncomingContent.Release release;

    OutgoingContent(String tag, long sizeBytes, String filesystem, boolean usedAsBlock, boolean encrypted, Reader reader,
            IncomingContent.Release release) {
        this.tag = tag;
        this.sizeBytes = sizeBytes;
        this.filesystem = filesystem;
        this.usedAsBlock = usedAsBlock;
        this.encrypted = encrypted;
        this.reader = reader;
        this.release = release;
    }

    public String tag() {
        return tag;
    }

    public long sizeBytes() {
        return sizeBytes;
    }

    public String filesystem() {
        return filesystem;
    }

    public boolean usedAsBlock() {
        return usedAsBlock;
    }

    public boolean encrypted() {
        return encrypted;
    }

    /** As {@link ImageContent#read}: every data block into the digest, the chunks from {@code from} on to {@code chunks}. */
    public byte[] read(long from, ImageContent.Chunks chunks) throws IOException, InterruptedException {
        return reader.read(from, chunks);
    }

    /** Gives the storage back as it was found (a logical volume activated for the read is deactivated). */
    @Override
    public void close() throws IOException, DeviceException {
        release.run();
    }
}
