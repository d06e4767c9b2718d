/* A jail's secrets across agtd's restarts.  A jail's secret variables (jail.run's `secrets`:
 * agt names its agent's key there) are never written to disk: jail.json holds their names
 * only.  Their values are kept in agtd's memory and, so that a jail started
 * again (or a jail exec) after agtd restarted, or was replaced by a newer build, still has
 * them, in the kernel's keyring: one "user" key per jail in root's user keyring, which
 * lives as long as the machine runs and no longer.  No other user can read it, nor a
 * process that possesses it without being root, and a key another user put under its
 * description is not taken (secrets.c); jails cannot reach the keyring at all (their
 * seccomp filter refuses keyctl, add_key and request_key).  After a reboot the values are
 * gone: the jail starts without them, and jail.inspect says which (`secrets_lost`).
 *
 * The key's description names the jail's directory and its creation time, so that a jail
 * made again under the same name never gets its predecessor's values.  Where the kernel
 * has no keyring, or refuses the key (more than 32 KiB of secrets), agtd says so in its log
 * and keeps them in memory only, as before. */
#ifndef AGT_SECRETS_H
#define AGT_SECRETS_H

struct agt_jail_record;

/* Whether an environment entry NAME=VALUE is one of names (a jail's secrets). */
int agt_secrets_is_one(char **names, const char *entry);

/* Keep rec's secret values (its env entries whose names are in rec->secrets) in the
 * keyring: 0, or -errno (logged). */
int agt_secrets_keep(const struct agt_jail_record *rec);

/* Put rec's kept values back into rec->env (rec->secrets names them; none of them is in
 * rec->env yet).  The names whose values were not found are returned (NULL when none),
 * for the caller to free with agt_strv_free. */
char **agt_secrets_restore(struct agt_jail_record *rec);

/* Drop rec's key, at jail rm. */
void agt_secrets_forget(const struct agt_jail_record *rec);

#endif
