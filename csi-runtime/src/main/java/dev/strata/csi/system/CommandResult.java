package dev.strata.csi.system;

/** How an external program ended: its exit code and everything it wrote. */
public record CommandResult(int exitCode, String stdout, String stderr) {

    /** Long enough for any tool's error, short enough to stay a readable log field and gRPC message. */
    private static final int MAX_STDERR_CHARS = 500;

    public boolean succeeded() {
        return exitCode == 0;
    }

    /**
     * Returns this result if the program succeeded, else throws with one line such as
     * {@code losetup --detach /dev/loop3: exit 1: losetup: /dev/loop3: detach failed: ...}.
     *
     * @param what the program and what it was asked to do, e.g. {@code "umount /mnt/x"}: a result
     *             does not know its command line, so the caller names it
     */
    public CommandResult check(String what) throws CommandException {
        if (succeeded()) {
            return this;
        }
        String detail = oneLine(stderr);
        throw new CommandException(what + ": exit " + exitCode + (detail.isEmpty() ? "" : ": " + detail));
    }

    private static String oneLine(String text) {
        String line = String.join("; ", text.strip().lines().map(String::strip).filter(l -> !l.isEmpty()).toList());
        return line.length() <= MAX_STDERR_CHARS ? line : line.substring(0, MAX_STDERR_CHARS) + "...";
    }
}
