import { useEffect, useState } from 'react';
import { api } from '../api';
import type { Settings } from '../records';
import { useLoad } from '../ui';

/**
 * One part of GET /v1/settings, kept as the last answer gave it: a save answers with the new
 * value, which replaces it without reading the settings again. Undefined until the first answer.
 */
export function useSetting<K extends keyof Settings>(part: K) {
  const settings = useLoad(() => api<{ data: Settings }>('GET', '/settings'), []);
  const [setting, setSetting] = useState<Settings[K] | undefined>(undefined);
  useEffect(() => {
    if (settings.data) setSetting(settings.data.data[part]);
  }, [settings.data, part]);
  return { settings, setting, setSetting };
}
