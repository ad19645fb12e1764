import { FileTypeValidator } from '@nestjs/common';
import { ApiError } from '@svc/platform';
import { parseWav } from '@svc/providers';

/**
 * The containers a transcription or translation takes (spec 4.10; WIRE-FORMATS 4.3, OpenAI's
 * list: flac, mp3, mp4, m4a, ogg, wav, webm), as `file-type` names them from their magic bytes.
 */
const AUDIO_TYPES: Record<string, string> = {
  'audio/wav': 'WAV',
  'audio/mpeg': 'MP3',
  'audio/flac': 'FLAC',
  'audio/ogg': 'OGG',
  'audio/ogg; codecs=opus': 'OGG',
  'video/ogg': 'OGG',
  'application/ogg': 'OGG',
  'video/webm': 'WebM',
  'video/matroska': 'Matroska',
  'audio/mp4': 'MP4',
  'audio/x-m4a': 'M4A',
  'video/mp4': 'MP4',
};
const NAMES = [...new Set(Object.values(AUDIO_TYPES))].join(', ');

/**
 * Nest's validator runs `file-type` (a dependency of @nestjs/common, pinned in package.json's
 * overrides), which this CommonJS build cannot import itself: it is ESM, and not hoisted.
 * With `overrideMimeType` the detected type is written back, to say what the bytes were.
 */
const sniffer = new FileTypeValidator({
  fileType: new RegExp(
    `^(?:${Object.keys(AUDIO_TYPES)
      .map((t) => t.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&'))
      .join('|')})$`,
  ),
  overrideMimeType: true,
});

/**
 * Spec 4.10 and 1 (rule 3, a request that ends in an error is not billed): bytes that are not
 * audio of a format the endpoint takes are refused before anything is held (issue 41 item 10),
 * whatever the part's filename or Content-Type claim. A model would fail on them at best, and at
 * worst "transcribe" them and be billed for it.
 */
export async function checkAudioFile(bytes: Buffer): Promise<void> {
  const probe = { mimetype: '', size: bytes.length, buffer: bytes };
  if (!(await sniffer.isValid(probe))) {
    const what = probe.mimetype === '' ? 'of no audio format' : `${probe.mimetype}`;
    throw ApiError.invalidRequest(`file is not audio this endpoint can read: its content is ${what}; send ${NAMES}.`, 'file', 'unsupported_audio_format');
  }
  // A RIFF/WAVE signature is 12 bytes: the header that makes it sound is checked too.
  if (probe.mimetype === 'audio/wav' && parseWav(bytes) === null) {
    throw ApiError.invalidRequest(
      'file is a WAV without a readable header (its fmt and data chunks): it cannot be decoded.',
      'file',
      'unsupported_audio_format',
    );
  }
}
