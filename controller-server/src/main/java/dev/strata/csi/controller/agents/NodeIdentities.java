package dev.strata.csi.controller.agents;

import dev.strata.csi.auth.Caller;
import dev.strata.csi.log.Log;
import dev.strata.csi.rpc.CsiException;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Which node an agent may register as: the node its pod runs on, as its ServiceAccount token's
 * node claim says. A token of a pod older than the last one accepted for that node (an earlier
 * node-server's token, replayed after a newer one registered) is refused. A token without a node
 * claim (Kubernetes before 1.30) proves no node: refused, unless the operator took the risk
 * (--allow-unbound-node-identity), when the node's word is taken, said once per node in the log.
 */
final class NodeIdentities {

    /** The newest pod that registered for each node. */
    private final Map<String, Caller> newest = new ConcurrentHashMap<>();
    private final Set<String> warned = ConcurrentHashMap.newKeySet();
    private final boolean allowUnbound;
    private final Log log;

    NodeIdentities(boolean allowUnbound, Log log) {
        this.allowUnbound = allowUnbound;
        this.log = log;
    }

    /**
     * Returns when {@code found}, the verified caller ({@link Caller#current()}), may register as
     * {@code nodeId}; PERMISSION_DENIED or UNAUTHENTICATED otherwise.
     */
    void requireMayRegister(String nodeId, Optional<Caller> found) {
        if (found.isEmpty()) {
            return; // callers are not identified here: the shared token was checked
        }
        Caller caller = found.get();
        if (caller.nodeName().isEmpty()) {
            if (!allowUnbound) {
                if (warned.add(nodeId)) {
                    log.warn("refused a registration: the identity token carries no node claim (Kubernetes before 1.30?); "
                            + "--allow-unbound-node-identity takes the node's word, at a risk", "node", nodeId, "caller", caller.subject());
                }
                throw CsiException.permissionDenied("the identity token carries no node claim, so it proves no node; "
                        + "controller-server takes such registrations only with --allow-unbound-node-identity");
            }
            if (warned.add(nodeId)) {
                log.warn("the identity token carries no node claim; --allow-unbound-node-identity takes this node's word for its name",
                        "node", nodeId, "caller", caller.subject());
            }
            return;
        }
        if (!caller.nodeName().get().equals(nodeId)) {
            log.warn("refused a registration for another node", "node", nodeId, "caller_node", caller.nodeName().get(),
                    "caller", caller.subject());
            throw CsiException.permissionDenied("the caller runs on node " + caller.nodeName().get()
                    + " and may register as that node only, not as " + nodeId);
        }
        newest.compute(nodeId, (node, last) -> {
            if (last != null && !last.podUid().equals(caller.podUid()) && caller.issuedAt().isBefore(last.issuedAt())) {
                log.warn("refused a registration with the token of an earlier pod", "node", nodeId, "pod", caller.podUid().orElse(""),
                        "newest_pod", last.podUid().orElse(""));
                throw CsiException.unauthenticated("the token is of a pod older than the node-server that registered for node "
                        + nodeId + " since");
            }
            return last == null || !caller.issuedAt().isBefore(last.issuedAt()) ? caller : last;
        });
    }
}
