// A stand-in for prettier's babel parser and estree printer, which GraphiQL
// loads only to prettify the variables and headers editors (JSON with
// comments). Those two prettier plugins weigh about 540 kB; jsonc-parser,
// already in the bundle for GraphiQL's JSON validation, formats the same
// text the same way. The build aliases both plugin imports to this module.

import { applyEdits, format, parse, printParseErrorCode } from 'jsonc-parser';

const astFormat = 'switchyard-jsonc';

function parseJSONC(text) {
  const errors = [];
  parse(text, errors, { allowTrailingComma: true, allowEmptyContent: true });
  if (errors.length > 0) {
    const { error, offset } = errors[0];
    throw new SyntaxError(`${printParseErrorCode(error)} at offset ${offset}`);
  }
  return { type: 'jsonc', text };
}

function printJSONC(path) {
  const { text } = path.node;
  const out = applyEdits(text, format(text, undefined, { tabSize: 2, insertSpaces: true, eol: '\n' }));
  return out === '' ? '' : `${out}\n`;
}

/** Prettier parsers: only "jsonc", the one GraphiQL asks for. */
export const parsers = {
  jsonc: {
    astFormat,
    parse: parseJSONC,
    locStart: () => 0,
    locEnd: (node) => node.text.length,
  },
};

/** Prettier printers, keyed by the AST format the parser produces. */
export const printers = {
  [astFormat]: { print: printJSONC },
};
