package postgres

// Test hooks.

// ListenerPID returns the backend pid of the store's listening connection.
func (s *Store) ListenerPID() uint32 { return s.hub.listenerPID() }

// ConnPID returns the backend pid of the elector's connection.
func (e *Elector) ConnPID() uint32 { return e.connPID.Load() }

// SetNoNotify turns the notifications of commits off (or on again).
func (s *Store) SetNoNotify(off bool) { s.noNotify.Store(off) }

// SetCopyMin sets the number of new rows from which commits use COPY: 0
// always, a huge number never (before any use).
func (s *Store) SetCopyMin(n int) { s.copyMin = n }
