package dev.strata.csi.linux;

import jnr.constants.platform.Errno;

/** A system call failed. The message names the call and the error as strerror(3) words it, with the errno name. */
public final class SyscallException extends Exception {

    private final String call;
    private final int errno;
    private final String reason;

    public SyscallException(String call, int errno) {
        super(call + ": " + describe(errno));
        this.call = call;
        this.errno = errno;
        this.reason = describe(errno);
    }

    /** The message without the call's name: "No such file or directory (ENOENT)". */
    public String reason() {
        return reason;
    }

    /** The call as named in the message, such as {@code ioctl(LOOP_CONFIGURE)}. */
    public String call() {
        return call;
    }

    public int errno() {
        return errno;
    }

    /** Whether the call failed with {@code expected}. */
    public boolean is(Errno expected) {
        return expected.defined() && expected.intValue() == errno;
    }

    /** "No such file or directory (ENOENT)"; an error number the platform table lacks is printed as a number. */
    public static String describe(int errno) {
        Errno known = Errno.valueOf(errno);
        return known == Errno.__UNKNOWN_CONSTANT__ ? "error " + errno : known.description() + " (" + known.name() + ")";
    }
}
