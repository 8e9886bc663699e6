// The signed-in person's session, shared by the shell and the pages.
import { createContext } from 'preact';
import { useContext } from 'preact/hooks';
import type { Schemas } from './api/client';
import { roleName } from './format';

export type Session = Schemas['GetSessionResponse'];

export interface SessionState {
  session: Session;
  /** Reads the session again (after a switch of client or a step-up). */
  refresh: () => void;
}

export const SessionContext = createContext<SessionState | null>(null);

export function useSession(): SessionState {
  const s = useContext(SessionContext);
  if (!s) throw new Error('useSession outside the shell');
  return s;
}

/** Whether the person is an ADMIN of the session's client: MEMBERs see ADMIN actions disabled. */
export function useIsAdmin(): boolean {
  return roleName(useSession().session.membership?.role) === 'ADMIN';
}
