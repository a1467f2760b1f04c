package dev.strata.csi.node.local.crypt;

import dev.strata.csi.node.local.DeviceException;
import java.nio.file.Path;
import java.util.Optional;
import java.util.OptionalInt;

/**
 * LUKS2 encryption of block devices, as dm-crypt mappings: the system calls of encryption at rest
 * ({@link VolumeEncryption} decides when each is made). A passphrase reaches the tools on their
 * standard input only, and no error message quotes it.
 */
public interface EncryptedDevices {

    /** Writes a LUKS2 header with one key slot for {@code passphrase} to {@code device}: whatever the device held is gone. */
    void format(Path device, Passphrase passphrase) throws DeviceException;

    /**
     * Opens the LUKS2 device {@code device} as the mapping {@code name}.
     *
     * @throws WrongPassphraseException when no key slot opens with {@code passphrase}
     */
    MappedDevice open(Path device, String name, Passphrase passphrase) throws DeviceException;

    /** Closes the mapping {@code name}; nothing to do when it is not open. Fails while it is in use (mounted, held open). */
    void close(String name) throws DeviceException;

    /**
     * Makes the open mapping {@code name} fill its backing device, grown since it was opened. LUKS2
     * keeps the volume key in the kernel's keyring, where no program can read it back: the resize
     * needs the passphrase again.
     *
     * @throws WrongPassphraseException when no key slot opens with {@code passphrase}
     */
    void resize(String name, Passphrase passphrase) throws DeviceException;

    /**
     * The key slot of {@code device}'s LUKS2 header that {@code passphrase} opens (the header is
     * read, nothing is mapped; the device may be open and in use): empty when it opens none.
     */
    OptionalInt slotOf(Path device, Passphrase passphrase) throws DeviceException;

    /**
     * Adds {@code added} to a free key slot of {@code device}'s header, the volume key unwrapped
     * with {@code existing}; the volume stays open and in use, no data is rewritten.
     *
     * @throws WrongPassphraseException when no key slot opens with {@code existing}
     */
    void addKey(Path device, Passphrase existing, Passphrase added) throws DeviceException;

    /**
     * Wipes key slot {@code slot} of {@code device}'s header. {@code remaining} must open another
     * slot, which the tools check first: a header is never left that no passphrase opens.
     *
     * @throws WrongPassphraseException when {@code remaining} opens no other slot
     */
    void killSlot(Path device, int slot, Passphrase remaining) throws DeviceException;

    /** The open mapping {@code name}, if it is open: also one a previous process of node-server opened. */
    Optional<MappedDevice> find(String name) throws DeviceException;
}
