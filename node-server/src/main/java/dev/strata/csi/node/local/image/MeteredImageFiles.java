package dev.strata.csi.node.local.image;

import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.linux.Kernel.DataRange;
import dev.strata.csi.linux.Kernel.Extent;
import dev.strata.csi.metrics.SystemSteps;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;

/**
 * {@link ImageFiles} whose steps that change files are timed: {@code create_image} (truncate or
 * fallocate to the size), {@code grow_image}, {@code reflink_image} or {@code copy_image} (as the
 * copy was made; a failed copy counts as {@code copy_image}), {@code sync_image} (a copy made durable).
 */
public final class MeteredImageFiles implements ImageFiles {

    private final ImageFiles files;
    private final SystemSteps steps;

    public MeteredImageFiles(ImageFiles files, SystemSteps steps) {
        this.files = files;
        this.steps = steps;
    }

    @Override
    public void create(Path image, long bytes, Allocation allocation) throws IOException {
        steps.time("create_image", () -> files.create(image, bytes, allocation));
    }

    @Override
    public void grow(Path image, long bytes, Allocation allocation) throws IOException {
        steps.time("grow_image", () -> files.grow(image, bytes, allocation));
    }

    @Override
    public CopyMethod copy(Path source, Path target) throws IOException {
        long start = System.nanoTime();
        CopyMethod method = null;
        try {
            method = files.copy(source, target);
            return method;
        } finally { // a reflink takes milliseconds, a copy seconds: two steps, not one blurred histogram
            steps.record(method == CopyMethod.REFLINK ? "reflink_image" : "copy_image", start, method != null);
        }
    }

    @Override
    public void punchHole(Path image, long offset, long length) throws IOException {
        files.punchHole(image, offset, length);
    }

    @Override
    public void sync(Path image) throws IOException {
        steps.time("sync_image", () -> files.sync(image));
    }

    @Override
    public List<DataRange> dataRanges(Path image) throws IOException {
        return files.dataRanges(image);
    }

    @Override
    public List<Extent> extents(Path image) throws IOException {
        return files.extents(image);
    }

    @Override
    public long sizeBytes(Path image) throws IOException {
        return files.sizeBytes(image);
    }

    @Override
    public long allocatedBytes(Path image) throws IOException {
        return files.allocatedBytes(image);
    }

    @Override
    public Space space(Path dir) throws IOException {
        return files.space(dir);
    }
}
