-- Whose browser a push subscription is: the named user signed in when it subscribed (NULL: the
-- relay token's own login, or no auth). Escalation to `user:<name>` reaches that person's browsers.
ALTER TABLE push_subscriptions ADD COLUMN user_id TEXT;
