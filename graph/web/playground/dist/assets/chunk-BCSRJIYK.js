/*! Third-party notices: THIRD_PARTY_LICENSES.txt */
import{a as e,b as s,c as a,d as c}from"./chunk-LUFABEOJ.js";import{i as n}from"./chunk-JFPDBFN4.js";n();var p="switchyard-jsonc";function l(t){let r=[];if(e(t,r,{allowTrailingComma:!0,allowEmptyContent:!0}),r.length>0){let{error:o,offset:i}=r[0];throw new SyntaxError(`${s(o)} at offset ${i}`)}return{type:"jsonc",text:t}}function f(t){let{text:r}=t.node,o=c(r,a(r,void 0,{tabSize:2,insertSpaces:!0,eol:`
`}));return o===""?"":`${o}
`}var m={jsonc:{astFormat:p,parse:l,locStart:()=>0,locEnd:t=>t.text.length}},S={[p]:{print:f}};export{m as parsers,S as printers};
