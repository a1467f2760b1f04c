package dev.strata.csi.linux;

/** An open file descriptor, closed by try-with-resources. */
public record FileDescriptor(Kernel kernel, int number, String path) implements AutoCloseable {

    /**
     * Closes the descriptor. A failing close is not reported: every descriptor here is either
     * read-only, a device used only for ioctls, or was fsynced before, so close has nothing left
     * to lose.
     */
    @Override
    public void close() {
        kernel.close(number);
    }
}
